package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/ingest"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/ledger"
)

type env struct {
	url                string
	root               string // the recordings root directory
	acme, rival, admin string
	revoked            string
	ledger             *ledger.Ledger
}

// setup serves the API over a fresh database, as the runtime role, with
// tenants acme and rival and three recordings on disk for each.
func setup(t *testing.T) env {
	t.Helper()
	ctx := context.Background()
	owner := testdb.New(t)
	pool := testdb.AsRuntime(t, owner)
	root := t.TempDir()
	for _, tenant := range []string{"acme", "rival"} {
		if err := os.MkdirAll(filepath.Join(root, tenant), 0o755); err != nil {
			t.Fatal(err)
		}
		for i, name := range []string{"a.wav", "b.wav", "c.wav"} {
			if err := os.WriteFile(filepath.Join(root, tenant, name), wav(tenant, i), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	store, err := audio.Open(ctx, audio.Config{URL: "file://" + root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	tenant := jobs.TenantConfig{Provider: "generic-http", BaseURL: "http://127.0.0.1:9", APIKey: "k"}
	p, err := jobs.New(pool, l, jobs.Config{Tenants: map[string]jobs.TenantConfig{"acme": tenant, "rival": tenant}}, jobs.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	p.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	ts := auth.New(pool)      // authenticates and revokes, as the runtime role
	owners := auth.New(owner) // creates, as `callscribe tokens create` does
	mk := func(tenant string, admin bool) string {
		_, secret, err := owners.Create(ctx, tenant, "", admin)
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	e := env{acme: mk("acme", false), rival: mk("rival", false), admin: mk("", true), ledger: l}
	rev, secret, err := owners.Create(ctx, "acme", "old", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Revoke(ctx, rev.ID); err != nil {
		t.Fatal(err)
	}
	e.revoked = secret
	srv := httptest.NewServer(ingest.NewHandler(ingest.Config{Pipeline: p, Ledger: l, Client: client, Auth: ts}))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.root = root
	return e
}

// wav is a tiny valid WAV, distinct per tenant and index.
func wav(tenant string, i int) []byte {
	data := bytes.Repeat([]byte{byte(i + 1), byte(len(tenant))}, 800)
	var b bytes.Buffer
	le := func(v uint32, n int) {
		for k := range n {
			b.WriteByte(byte(v >> (8 * k)))
		}
	}
	b.WriteString("RIFF")
	le(uint32(36+len(data)), 4)
	b.WriteString("WAVEfmt ")
	le(16, 4)
	le(1, 2)
	le(1, 2)
	le(8000, 4)
	le(16000, 4)
	le(2, 2)
	le(16, 2)
	b.WriteString("data")
	le(uint32(len(data)), 4)
	b.Write(data)
	return b.Bytes()
}

func (e env) do(t *testing.T, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

func errField(m map[string]any) (typ, field string) {
	e, _ := m["error"].(map[string]any)
	typ, _ = e["type"].(string)
	field, _ = e["field"].(string)
	return typ, field
}

func TestCreateIsIdempotentAndTenantScoped(t *testing.T) {
	t.Parallel()
	e := setup(t)
	code, got := e.do(t, e.acme, "POST", "/v1/recordings", `{"call_id":"c-1","audio":"acme/a.wav","lane":"immediate"}`)
	if code != 201 || got["created"] != true {
		t.Fatalf("first create: %d %v", code, got)
	}
	rec := got["recording"].(map[string]any)
	id := rec["id"].(string)
	code, got = e.do(t, e.acme, "POST", "/v1/recordings", `{"call_id":"c-1","audio":"acme/a.wav","lane":"immediate"}`)
	if code != 200 || got["created"] != false || got["recording"].(map[string]any)["id"] != id {
		t.Fatalf("second create: %d %v, want 200 with the same recording", code, got)
	}
	// Reads: the owner sees it with its events; the rival learns nothing.
	code, got = e.do(t, e.acme, "GET", "/v1/recordings/c-1", "")
	if code != 200 || len(got["recordings"].([]any)) != 1 {
		t.Fatalf("read own call: %d %v", code, got)
	}
	// Ingest wrote two events: received, then received → eligible.
	if evs := got["recordings"].([]any)[0].(map[string]any)["events"].([]any); len(evs) != 2 ||
		evs[1].(map[string]any)["new_state"] != "eligible" {
		t.Fatalf("events of the recording: %v", evs)
	}
	for _, try := range []struct{ method, path, body string }{
		{"GET", "/v1/recordings/c-1", ""},
		{"GET", "/v1/recordings?tenant=acme", ""},
		{"POST", "/v1/recordings", `{"tenant_id":"acme","call_id":"c-2","audio":"acme/b.wav"}`},
		{"POST", "/v1/recordings:batch", `{"items":[{"tenant_id":"acme","call_id":"c-3","audio":"acme/c.wav"}]}`},
		{"POST", "/v1/recordings/" + id + ":retry", ""},
	} {
		code, got := e.do(t, e.rival, try.method, try.path, try.body)
		if try.path == "/v1/recordings:batch" {
			res := got["results"].([]any)[0].(map[string]any)
			code = int(res["status"].(float64))
		}
		if code != 404 {
			t.Errorf("rival's token, %s %s: %d %v, want 404", try.method, try.path, code, got)
		}
	}
	// Nothing the rival tried was created.
	if recs, _ := e.ledger.RecordingsByCall(context.Background(), "acme", "c-2"); len(recs) != 0 {
		t.Fatalf("the rival created acme's recording: %v", recs)
	}
	// The rival's own list is empty; acme's holds one.
	if code, got := e.do(t, e.rival, "GET", "/v1/recordings", ""); code != 200 || len(got["recordings"].([]any)) != 0 {
		t.Fatalf("rival's list: %d %v", code, got)
	}
	for _, tok := range []string{"", e.revoked, "cs_1_" + strings.Repeat("f", 64)} {
		if code, got := e.do(t, tok, "GET", "/v1/recordings", ""); code != 401 {
			t.Errorf("token %q: %d %v, want 401", tok, code, got)
		}
	}
	// Retry is an admin's, for reviewable recordings only.
	if code, got := e.do(t, e.admin, "POST", "/v1/recordings/"+id+":retry", ""); code != 409 {
		t.Fatalf("retry of a recording that is not reviewable: %d %v, want 409", code, got)
	}
}

func TestStrictBodies(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name, body string
		status     int
		typ, field string
	}{
		{"not JSON", `{"call_id":`, 400, "invalid_request", ""},
		{"unknown field", `{"call_id":"c","audio":"acme/a.wav","priority":1}`, 400, "invalid_request", "priority"},
		{"trailing data", `{"call_id":"c","audio":"acme/a.wav"} {"x":1}`, 400, "invalid_request", ""},
		{"wrong type", `{"call_id":7,"audio":"acme/a.wav"}`, 400, "invalid_request", "call_id"},
		{"no call", `{"audio":"acme/a.wav"}`, 400, "invalid_request", "call_id"},
		{"bad lane", `{"call_id":"c","audio":"acme/a.wav","lane":"fast"}`, 400, "invalid_request", "lane"},
		{"call id with a newline", `{"call_id":"c\n1","audio":"acme/a.wav"}`, 400, "invalid_request", "call_id"},
		{"call id too long", `{"call_id":"` + strings.Repeat("c", 200) + `","audio":"acme/a.wav"}`, 400, "invalid_request", "call_id"},
		{"another tenant's audio", `{"call_id":"c","audio":"rival/a.wav"}`, 400, "invalid_request", "audio"},
		{"audio escaping", `{"call_id":"c","audio":"acme/../rival/a.wav"}`, 400, "invalid_request", "audio"},
		{"absolute audio", `{"call_id":"c","audio":"/etc/passwd"}`, 400, "invalid_request", "audio"},
		{"missing audio", `{"call_id":"c","audio":"acme/none.wav"}`, 422, "audio_not_found", "audio"},
		{"oversized", `{"call_id":"` + strings.Repeat("x", ingest.MaxBodyBytes) + `","audio":"acme/a.wav"}`, 413, "too_large", ""},
	}
	for _, c := range cases {
		code, got := e.do(t, e.acme, "POST", "/v1/recordings", c.body)
		typ, field := errField(got)
		if code != c.status || typ != c.typ || field != c.field {
			t.Errorf("%s: %d %s %q (%v), want %d %s %q", c.name, code, typ, field, got, c.status, c.typ, c.field)
		}
	}
}

func TestBatchKeepsGoodItems(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := `{"items":[
		{"call_id":"b-1","audio":"acme/a.wav"},
		{"call_id":"b-2","audio":"acme/none.wav"},
		{"call_id":"b-3","audio":"acme/b.wav","lane":"immediate"},
		{"call_id":"","audio":"acme/c.wav"},
		{"call_id":"b-1","audio":"acme/a.wav"}]}`
	code, got := e.do(t, e.acme, "POST", "/v1/recordings:batch", body)
	if code != 200 || got["failed"] != float64(2) {
		t.Fatalf("batch: %d %v", code, got)
	}
	want := []int{201, 422, 201, 400, 200}
	for i, r := range got["results"].([]any) {
		res := r.(map[string]any)
		if int(res["index"].(float64)) != i || int(res["status"].(float64)) != want[i] {
			t.Errorf("item %d: %v, want status %d", i, res, want[i])
		}
	}
	// The good ones are there; listing pages through them with a cursor.
	code, got = e.do(t, e.acme, "GET", "/v1/recordings?limit=1", "")
	next, _ := got["next_cursor"].(string)
	if code != 200 || len(got["recordings"].([]any)) != 1 || next == "" {
		t.Fatalf("first page: %d %v", code, got)
	}
	code, got = e.do(t, e.acme, "GET", "/v1/recordings?limit=1&cursor="+next, "")
	if code != 200 || len(got["recordings"].([]any)) != 1 || got["next_cursor"] != nil {
		t.Fatalf("second page: %d %v", code, got)
	}
	if code, got := e.do(t, e.acme, "GET", "/v1/recordings?lane=immediate", ""); code != 200 || len(got["recordings"].([]any)) != 1 {
		t.Fatalf("immediate lane: %d %v", code, got)
	}
	if code, got := e.do(t, e.acme, "GET", "/v1/recordings?cursor=nope", ""); code != 400 {
		t.Fatalf("forged cursor: %d %v", code, got)
	}
	if code, got := e.do(t, e.acme, "POST", "/v1/recordings:batch", `{"items":[]}`); code != 400 {
		t.Fatalf("empty batch: %d %v", code, got)
	}
}
