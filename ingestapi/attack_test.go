package ingestapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A 422 about a recording's audio tells the tenant nothing about the
// server's file system: no absolute path, no system call, no link target,
// and the same answer whether the file is missing, is a link out of the
// tenant's directory (into another tenant's, or outside the root), or is a
// dangling link, so that it is no oracle for what exists. The details go to
// the server's log, under the request id the answer carries.
func TestAttackAudioErrorsRevealNoServerPaths(t *testing.T) {
	t.Parallel()
	e := setup(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.wav")
	if err := os.WriteFile(secret, wav("outside", 0), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link-rival.wav": "../rival/a.wav",          // another tenant's file, inside the root
		"outside.wav":    secret,                    // a file outside the root
		"dangling.wav":   "/nonexistent/call.wav",   // nowhere
		"rdir":           "../rival",                // another tenant's directory
		"odir":           outside,                   // a directory outside the root
		"loop.wav":       "loop.wav",                // a loop
		"updir":          filepath.Join("..", ".."), // above the root
	} {
		if err := os.Symlink(target, filepath.Join(e.root, "acme", link)); err != nil {
			t.Fatal(err)
		}
	}
	post := func(audio string) (int, string) {
		t.Helper()
		body := strings.NewReader(`{"call_id":"c-attack","audio":"` + audio + `"}`)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/v1/recordings", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.acme)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}

	var first string
	for _, audio := range []string{
		"acme/none.wav", "acme/link-rival.wav", "acme/outside.wav", "acme/dangling.wav",
		"acme/rdir/a.wav", "acme/rdir/none.wav", "acme/odir/secret.wav", "acme/loop.wav", "acme/updir/etc/passwd",
	} {
		code, raw := post(audio)
		if code != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s, want 422", audio, code, raw)
			continue
		}
		for _, leak := range []string{e.root, outside, "/nonexistent", "/tmp", "/etc", "file://", "lstat", "stat ", "symbolic link", "escapes", "no such file"} {
			if strings.Contains(raw, leak) {
				t.Errorf("%s: the answer %s contains %q", audio, raw, leak)
			}
		}
		var m struct {
			Error struct {
				Type, Field, Message string
				RequestID            string `json:"request_id"`
			}
		}
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("%s: %s: %v", audio, raw, err)
		}
		if m.Error.RequestID == "" {
			t.Errorf("%s: %s carries no request id", audio, raw)
		}
		same := m.Error.Type + "|" + m.Error.Field + "|" + m.Error.Message
		if first == "" {
			first = same
		} else if same != first {
			t.Errorf("%s: answered %q, the missing file %q: the answer tells them apart", audio, same, first)
		}
	}
	// The rival's file was not ingested as acme's.
	if recs, _ := e.ledger.RecordingsByCall(t.Context(), "acme", "c-attack"); len(recs) != 0 {
		t.Errorf("acme ingested %d recordings through links", len(recs))
	}
}
