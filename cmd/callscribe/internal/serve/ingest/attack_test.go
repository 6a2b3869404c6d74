package ingest_test

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

// postCT posts body to path with token and Content-Type ct; it returns the
// status and the answer.
func (e env) postCT(t *testing.T, token, ct, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("POST %s: %d, not JSON: %q", path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

func errMessage(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

// A call id (or tenant, or audio key) carrying an invisible or
// bidirectional control character is refused with 400 naming the field and
// the byte: "c-1\u202Eevil" shows as "c-1live" in a list or a CRM, and
// "c\u200B1" as "c1", so such ids could pass for others.
func TestAttackInvisibleCharactersInIDsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct {
		body, field, at string
	}{
		{`{"call_id":"c-1\u202eevil","audio":"acme/a.wav"}`, "call_id", "U+202E at byte 3"},
		{"{\"call_id\":\"c\u200b1\",\"audio\":\"acme/a.wav\"}", "call_id", "U+200B at byte 1"},
		{`{"call_id":"\u2066c-2\u2069","audio":"acme/a.wav"}`, "call_id", "U+2066 at byte 0"},
		{`{"call_id":"\ufeffc-3","audio":"acme/a.wav"}`, "call_id", "U+FEFF at byte 0"},
		{`{"call_id":"c-4\u0000","audio":"acme/a.wav"}`, "call_id", "U+0000 at byte 3"},
		{`{"call_id":"c-5","audio":"acme/a\u202e.wav"}`, "audio", "U+202E at byte 6"},
		{`{"call_id":"c-6","audio":"acme/a.wav","model":"m\u200d"}`, "model", "U+200D at byte 1"},
	} {
		code, got := e.do(t, e.acme, "POST", "/v1/recordings", c.body)
		typ, field := errField(got)
		if code != 400 || typ != "invalid_request" || field != c.field || !strings.Contains(errMessage(got), c.at) {
			t.Errorf("%s: %d %v, want 400 naming %s and %s", c.body, code, got, c.field, c.at)
		}
	}
	// In a batch, the item is refused and the others are taken.
	code, got := e.do(t, e.acme, "POST", "/v1/recordings:batch",
		`{"items":[{"call_id":"c-7\u202e","audio":"acme/a.wav"},{"call_id":"c-8","audio":"acme/b.wav"}]}`)
	results, _ := got["results"].([]any)
	if code != 200 || len(results) != 2 || got["failed"] != float64(1) {
		t.Fatalf("batch: %d %v", code, got)
	}
	if r0 := results[0].(map[string]any); r0["status"] != float64(400) || r0["error"].(map[string]any)["field"] != "call_id" {
		t.Errorf("batch item 0: %v, want 400 naming call_id", r0)
	}
	// An admin's tenant and a read's call id or tenant are ids too.
	if code, got := e.do(t, e.admin, "POST", "/v1/recordings", `{"tenant_id":"acme\u202e","call_id":"c-9","audio":"acme\u202e/a.wav"}`); code != 400 {
		t.Errorf("admin's tenant_id with U+202E: %d %v, want 400", code, got)
	}
	for _, path := range []string{"/v1/recordings/c-1%E2%80%AEevil", "/v1/recordings?tenant=acme%E2%80%8B"} {
		code, got := e.do(t, e.acme, "GET", path, "")
		if typ, _ := errField(got); code != 400 || typ != "invalid_request" || !strings.Contains(errMessage(got), "at byte") {
			t.Errorf("GET %s: %d %v, want 400 naming the byte", path, code, got)
		}
	}
	for _, call := range []string{"c-1\u202eevil", "c\u200b1", "c-7\u202e", "c-9"} {
		for _, tenant := range []string{"acme", "acme\u202e"} {
			if recs, _ := e.ledger.RecordingsByCall(t.Context(), tenant, call); len(recs) != 0 {
				t.Errorf("%+q of %+q was ingested", call, tenant)
			}
		}
	}
}

// Keys match their fields exactly: encoding/json read "TENANT_ID" as
// tenant_id, so that a gateway that checks tenant_id and the server could
// disagree about whose recording a request makes. It is refused, naming
// the key, and nothing is ingested.
func TestAttackWrongCaseKeyRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct{ token, path, body, field string }{
		{e.admin, "/v1/recordings", `{"TENANT_ID":"rival","call_id":"c-case","audio":"rival/a.wav"}`, "TENANT_ID"},
		{e.rival, "/v1/recordings", `{"call_id":"c-case","Audio":"rival/a.wav"}`, "Audio"},
		{e.rival, "/v1/recordings:batch", `{"Items":[{"call_id":"c-case","audio":"rival/a.wav"}]}`, "Items"},
		{e.rival, "/v1/recordings:batch", `{"items":[{"Call_ID":"c-case","audio":"rival/a.wav"}]}`, "items[0].Call_ID"},
	} {
		code, got := e.do(t, c.token, "POST", c.path, c.body)
		typ, field := errField(got)
		if code != 400 || typ != "invalid_request" || field != c.field || !strings.Contains(errMessage(got), "case-sensitive") {
			t.Errorf("%s: %d %v, want 400 naming %s as case-sensitive", c.body, code, got, c.field)
		}
	}
	if recs, _ := e.ledger.RecordingsByCall(t.Context(), "rival", "c-case"); len(recs) != 0 {
		t.Errorf("rival's recording was ingested through a wrong-case key")
	}
}

// A key twice in one object is refused, wherever the object is:
// encoding/json let the last one win, so that an admin's
// {"tenant_id":"acme", ..., "tenant_id":"rival"} was rival's to the
// server and acme's to whatever read the first.
func TestAttackDuplicateKeyRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct{ token, path, body, field string }{
		{e.admin, "/v1/recordings", `{"tenant_id":"acme","call_id":"c-dup","audio":"rival/a.wav","tenant_id":"rival"}`, "tenant_id"},
		{e.rival, "/v1/recordings", `{"call_id":"c-dup","call_id":"c-dup-2","audio":"rival/a.wav"}`, "call_id"},
		{e.rival, "/v1/recordings:batch", `{"items":[{"call_id":"c-dup","audio":"rival/a.wav"},{"call_id":"c-dup-3","audio":"rival/b.wav","audio":"rival/c.wav"}]}`, "items[1].audio"},
		{e.rival, "/v1/recordings:batch", `{"items":[],"items":[{"call_id":"c-dup","audio":"rival/a.wav"}]}`, "items"},
	} {
		code, got := e.do(t, c.token, "POST", c.path, c.body)
		typ, field := errField(got)
		if code != 400 || typ != "invalid_request" || field != c.field || !strings.Contains(errMessage(got), "duplicate key") {
			t.Errorf("%s: %d %v, want 400 naming the duplicate %s", c.body, code, got, c.field)
		}
	}
	for _, call := range []string{"c-dup", "c-dup-2", "c-dup-3"} {
		if recs, _ := e.ledger.RecordingsByCall(t.Context(), "rival", call); len(recs) != 0 {
			t.Errorf("rival's %s was ingested from a body with a duplicate key", call)
		}
	}
}

// A body is JSON only as application/json: application/jsonp,
// application/json-seq and other look-alikes get 415, and nothing is
// ingested.
func TestAttackJSONLookalikeMediaTypesRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, ct := range []string{"application/jsonp", "application/json-seq", "application/jsonx", "application/json+evil", "text/json", "application/json; charset=utf-16"} {
		code, got := e.postCT(t, e.acme, ct, "/v1/recordings", `{"call_id":"c-ct","audio":"acme/a.wav"}`)
		if typ, _ := errField(got); code != http.StatusUnsupportedMediaType || typ != "unsupported_media_type" {
			t.Errorf("Content-Type %s: %d %v, want 415", ct, code, got)
		}
	}
	if recs, _ := e.ledger.RecordingsByCall(t.Context(), "acme", "c-ct"); len(recs) != 0 {
		t.Errorf("a look-alike media type was ingested")
	}
	if code, got := e.postCT(t, e.acme, "application/json; charset=UTF-8", "/v1/recordings", `{"call_id":"c-ct","audio":"acme/a.wav"}`); code != 201 {
		t.Fatalf("application/json; charset=UTF-8: %d %v, want 201", code, got)
	}
}
