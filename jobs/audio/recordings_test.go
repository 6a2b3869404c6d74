package audio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tenants' zones, whatever the machine has
)

// recordingsDir holds the committed speech recordings and their manifest.
const recordingsDir = "../../testdata/recordings"

// manifestLine is one line of testdata/recordings/manifest.jsonl.
type manifestLine struct {
	TenantID     string `json:"tenant_id"`
	CallID       string `json:"call_id"`
	Audio        string `json:"audio"`
	Lane         string `json:"lane"`
	Language     string `json:"language"`
	StartedAt    string `json:"started_at"`
	ExpectedText string `json:"expected_text"`
}

// tenantZones is where each test tenant works; started_at carries its
// offset.
var tenantZones = map[string]string{
	"northline": "America/Chicago",
	"harbor":    "America/Los_Angeles",
	"ridgeway":  "America/New_York",
}

// TestRecordingsManifest checks that every line of the manifest is valid and
// that every recording it lists exists under the root, is a WAV lasting 2 to
// 10 seconds, and that no recording is left out of it.
func TestRecordingsManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := Open(ctx, Config{URL: recordingsDir, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })

	f, err := os.Open(filepath.Join(recordingsDir, "manifest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()

	listed := map[string]bool{}
	lanes := map[string]int{}
	perTenant := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var m manifestLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			t.Errorf("line %d: %v", n, err)
			continue
		}
		if dec.More() {
			t.Errorf("line %d: more than one JSON value", n)
		}
		checkManifestLine(t, n, m)

		if listed[m.Audio] {
			t.Errorf("line %d: %s listed twice", n, m.Audio)
		}
		listed[m.Audio] = true
		lanes[m.Lane]++
		perTenant[m.TenantID]++

		key, err := store.Key(m.Audio)
		if err != nil || key != m.Audio {
			t.Errorf("line %d: Key(%q) = %q, %v", n, m.Audio, key, err)
			continue
		}
		info, err := store.Inspect(ctx, key)
		if err != nil {
			t.Errorf("line %d: Inspect(%q): %v", n, key, err)
			continue
		}
		if info.Format != "wav" || info.Duration < 2*time.Second || info.Duration > 10*time.Second {
			t.Errorf("line %d: %s: format %q, duration %v; want a WAV of 2-10s", n, key, info.Format, info.Duration)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	if len(listed) != 12 || len(perTenant) != 3 {
		t.Errorf("manifest lists %d recordings of %d tenants, want 12 of 3", len(listed), len(perTenant))
	}
	if lanes["immediate"] == 0 || lanes["batch"] == 0 {
		t.Errorf("lanes %v: want both immediate and batch", lanes)
	}
	wavs, err := filepath.Glob(filepath.Join(recordingsDir, "*", "*.wav"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range wavs {
		rel, _ := filepath.Rel(recordingsDir, p)
		if !listed[filepath.ToSlash(rel)] {
			t.Errorf("%s is not in the manifest", rel)
		}
	}
}

func checkManifestLine(t *testing.T, n int, m manifestLine) {
	t.Helper()
	zone, ok := tenantZones[m.TenantID]
	if !ok {
		t.Errorf("line %d: tenant_id %q is not one of the test tenants", n, m.TenantID)
	}
	if m.CallID == "" || strings.ContainsAny(m.CallID, "/\\ ") {
		t.Errorf("line %d: call_id %q", n, m.CallID)
	}
	if want := m.TenantID + "/" + m.CallID + ".wav"; m.Audio != want {
		t.Errorf("line %d: audio %q, want %q", n, m.Audio, want)
	}
	if m.Lane != "immediate" && m.Lane != "batch" {
		t.Errorf("line %d: lane %q, want immediate or batch", n, m.Lane)
	}
	if m.Language != "en" {
		t.Errorf("line %d: language %q, want en", n, m.Language)
	}
	if strings.TrimSpace(m.ExpectedText) == "" || m.ExpectedText != strings.TrimSpace(m.ExpectedText) {
		t.Errorf("line %d: expected_text %q", n, m.ExpectedText)
	}
	at, err := time.Parse(time.RFC3339, m.StartedAt)
	if err != nil {
		t.Errorf("line %d: started_at: %v", n, err)
		return
	}
	if strings.HasSuffix(m.StartedAt, "Z") {
		t.Errorf("line %d: started_at %q is in UTC, want the tenant's local offset", n, m.StartedAt)
	}
	if loc, err := time.LoadLocation(zone); ok && err == nil {
		_, want := at.In(loc).Zone()
		if _, got := at.Zone(); got != want {
			t.Errorf("line %d: started_at %q has offset %ds, but %s is at %ds then", n, m.StartedAt, got, zone, want)
		}
	}
}
