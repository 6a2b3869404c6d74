package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/alert"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

// refusalBundle serves the capacity API with vox/stt (limit 10) and
// vox/tts (limit 6), the learned-limit alerts going to a webhook whose
// bodies arrive on alerts, to northline's token "tok-n", harbor's
// "tok-h" and an admin's "tok-a".
type refusalBundle struct {
	n, h, a, none httpBundle
	leases        *capacity.Leases
	alerts        chan map[string]any
}

func refusalSetup(t *testing.T, opts httpapi.Options) refusalBundle {
	t.Helper()
	alerts := make(chan map[string]any, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Errorf("webhook body %q: %v", raw, err)
		}
		alerts <- m
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	wh, err := alert.NewWebhook(alert.WebhookConfig{URL: hook.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wh.Close)
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	leases, err := capacity.New(captest.OnRedis(t, rdb, prefix), capacity.Config{
		Limits:         map[string]capacity.ProviderLimit{"vox/stt": {Limit: 10}, "vox/tts": {Limit: 6}},
		OnLimitLearned: wh.Notify})
	if err != nil {
		t.Fatal(err)
	}
	opts.Authenticate = func(_ context.Context, bearer string) (string, bool, bool, error) {
		switch bearer {
		case "tok-n":
			return "northline", false, true, nil
		case "tok-h":
			return "harbor", false, true, nil
		case "tok-a":
			return "", true, true, nil
		}
		return "", false, false, nil
	}
	srv := httptest.NewServer(httpapi.NewHandler(leases, nil, opts))
	t.Cleanup(srv.Close)
	as := func(tok string) httpBundle { return httpBundle{url: srv.URL, leases: leases, token: tok} }
	return refusalBundle{n: as("tok-n"), h: as("tok-h"), a: as("tok-a"), none: as(""), leases: leases, alerts: alerts}
}

// nextAlert is the next body the webhook received.
func (b refusalBundle) nextAlert(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m := <-b.alerts:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no alert at the webhook within 30s")
		return nil
	}
}

func effectiveLimit(t *testing.T, admin httpBundle, provider, kind string) (float64, bool) {
	t.Helper()
	code, got, _ := admin.do(t, "GET", "/v1/status", "")
	if code != 200 {
		t.Fatalf("status: %d %v", code, got)
	}
	for _, p := range got["providers"].([]any) {
		pm := p.(map[string]any)
		if pm["provider"] == provider && pm["kind"] == kind {
			return pm["effective_limit"].(float64), pm["learned"].(bool)
		}
	}
	t.Fatalf("no %s/%s in %v", provider, kind, got)
	return 0, false
}

// wantRefusal checks a report's answer.
func wantRefusal(t *testing.T, code int, got map[string]any, inUse, before, after float64, lowered bool) {
	t.Helper()
	if code != 200 || got["in_use"] != inUse || got["limit_before"] != before || got["limit_after"] != after ||
		got["lowered"] != lowered || got["failed"] != false {
		t.Fatalf("report: %d %v, want in_use %v, limit %v → %v, lowered %v", code, got, inUse, before, after, lowered)
	}
}

// A refusal reported over HTTP below the limit lowers it to exactly
// in_use − 1, platform-wide, and alerts (the webhook hears it, LimitAlerts
// counts it); a report at or above the limit in force changes nothing and
// alerts nothing; nothing raises a limit. TTS limits learn the same way.
func TestHTTPRefusalLowersLimit(t *testing.T) {
	t.Parallel()
	b := refusalSetup(t, httpapi.Options{})

	code, got, _ := b.a.do(t, "POST", "/v1/providers/vox/stt/refusals", `{"in_use": 7}`)
	wantRefusal(t, code, got, 7, 10, 6, true)
	if got["provider"] != "vox" || got["kind"] != "stt" || got["reported_in_use"] != 7.0 || got["configured_limit"] != 10.0 {
		t.Fatalf("report: %v", got)
	}
	if lim, learned := effectiveLimit(t, b.a, "vox", "stt"); lim != 6 || !learned {
		t.Fatalf("status after the report: limit %v learned %v, want 6 learned", lim, learned)
	}
	a := b.nextAlert(t)
	if a["provider"] != "vox" || a["kind"] != "stt" || a["configured_limit"] != 10.0 || a["learned_limit"] != 6.0 || a["reporter"] != nil {
		t.Fatalf("alert %v", a)
	}
	// Another process sharing Redis is bound by it.
	if _, g := b.leases.Acquire(t.Context(), capacity.Request{Provider: "vox", Kind: "stt", Holder: "x"}); g.Limit != 6 {
		t.Fatalf("acquire after the report: %+v, want limit 6", g)
	}

	// At or above the limit in force (6): nothing changes, no alert.
	for _, inUse := range []string{"6", "9", "1000000"} {
		code, got, _ = b.a.do(t, "POST", "/v1/providers/vox/stt/refusals", `{"in_use": `+inUse+`}`)
		if code != 200 || got["lowered"] != false || got["limit_before"] != 6.0 || got["limit_after"] != 6.0 {
			t.Fatalf("report at %s over the limit 6: %d %v", inUse, code, got)
		}
	}
	if lim, _ := effectiveLimit(t, b.a, "vox", "stt"); lim != 6 {
		t.Fatalf("limit after reports above it: %v, want still 6", lim)
	}
	if n := b.leases.LimitAlerts(); n != 1 {
		t.Fatalf("LimitAlerts %d after one drop and three reports above the limit, want 1", n)
	}

	// A lower one lowers it again; its alert is the webhook's next body,
	// so the three reports above sent none.
	code, got, _ = b.a.do(t, "POST", "/v1/providers/vox/stt/refusals", `{"in_use": 4}`)
	wantRefusal(t, code, got, 4, 6, 3, true)
	if a := b.nextAlert(t); a["learned_limit"] != 3.0 {
		t.Fatalf("second alert %v, want learned_limit 3", a)
	}

	// TTS: the same.
	code, got, _ = b.a.do(t, "POST", "/v1/providers/vox/tts/refusals", `{"in_use": 3}`)
	wantRefusal(t, code, got, 3, 6, 2, true)
	if lim, learned := effectiveLimit(t, b.a, "vox", "tts"); lim != 2 || !learned {
		t.Fatalf("tts after the report: %v %v, want 2 learned", lim, learned)
	}
	if a := b.nextAlert(t); a["kind"] != "tts" || a["learned_limit"] != 2.0 {
		t.Fatalf("tts alert %v", a)
	}
	// Never below the floor: in use 1 teaches 1, not 0.
	code, got, _ = b.a.do(t, "POST", "/v1/providers/vox/tts/refusals", `{"in_use": 1}`)
	wantRefusal(t, code, got, 1, 2, 1, true)
	if n := b.leases.LimitAlerts(); n != 4 {
		t.Fatalf("LimitAlerts %d, want 4", n)
	}

	// The operator restores it; the events keep what happened.
	if err := b.leases.SetLimit(t.Context(), "vox", "stt", 10); err != nil {
		t.Fatal(err)
	}
	if lim, learned := effectiveLimit(t, b.a, "vox", "stt"); lim != 10 || learned {
		t.Fatalf("after SetLimit: %v %v", lim, learned)
	}
	events, err := b.leases.LimitEvents(t.Context(), "vox", "stt")
	if err != nil || len(events) != 3 || events[0].Reason != "set" || events[1].To != 3 || events[2].To != 6 || events[2].Reporter != "" {
		t.Fatalf("events %+v %v", events, err)
	}
}

// Limits are platform-wide, so any organisation's token may report, but
// its word is judged by no fewer leases than Redis holds live, it is
// named in the event and the alert, and it is paced per organisation and
// provider/kind; admin tokens are not paced. Without a valid token: 401.
func TestHTTPRefusalOrganisations(t *testing.T) {
	t.Parallel()
	b := refusalSetup(t, httpapi.Options{RefusalReportEvery: time.Hour})
	for i := range 4 {
		code, got, _ := b.n.do(t, "POST", "/v1/leases", `{"provider":"vox","kind":"stt","holder":"call-`+string(rune('a'+i))+`","lane":"live"}`)
		if code != 200 || got["granted"] != true {
			t.Fatalf("northline's lease %d: %d %v", i, code, got)
		}
	}

	// Northline says 2 were in use; Redis holds 4: judged by 4, 10 → 3.
	code, got, _ := b.n.do(t, "POST", "/v1/providers/vox/stt/refusals", `{"in_use": 2}`)
	wantRefusal(t, code, got, 4, 10, 3, true)
	if got["reported_in_use"] != 2.0 {
		t.Fatalf("report: %v", got)
	}
	if a := b.nextAlert(t); a["reporter"] != "northline" || a["learned_limit"] != 3.0 {
		t.Fatalf("alert %v, want reporter northline", a)
	}
	events, err := b.leases.LimitEvents(t.Context(), "vox", "stt")
	if err != nil || len(events) != 1 || events[0].Reporter != "northline" || events[0].InUse != 4 {
		t.Fatalf("events %+v %v", events, err)
	}

	// Again within the hour: 429, nothing taken.
	code, got, hdr := b.n.do(t, "POST", "/v1/providers/vox/stt/refusals", `{"in_use": 2}`)
	if code != 429 || errType(got) != "rate_limited" || hdr.Get("Retry-After") == "" || errField(got, "provider") != "vox" {
		t.Fatalf("northline again: %d %v %v", code, got, hdr)
	}
	// The pace is per provider/kind and per organisation.
	code, got, _ = b.n.do(t, "POST", "/v1/providers/vox/tts/refusals", `{"in_use": 9}`)
	wantRefusal(t, code, got, 9, 6, 6, false)
	code, got, _ = b.h.do(t, "POST", "/v1/providers/vox/stt/refusals", `{"in_use": 3}`)
	wantRefusal(t, code, got, 4, 3, 3, false) // Redis's 4 ≥ the limit 3: unchanged
	// Admin tokens are not paced.
	for range 2 {
		code, got, _ = b.a.do(t, "POST", "/v1/providers/vox/tts/refusals", `{"in_use": 8}`)
		wantRefusal(t, code, got, 8, 6, 6, false)
	}
	if lim, _ := effectiveLimit(t, b.a, "vox", "stt"); lim != 3 {
		t.Fatalf("limit %v, want 3", lim)
	}

	// No token, a made-up token, the wrong scheme: 401, nothing changes.
	for _, auth := range []string{"", "Bearer tok-x", "Basic tok-a"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, b.a.url+"/v1/providers/vox/tts/refusals", strings.NewReader(`{"in_use": 1}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("Authorization %q: %d, want 401", auth, resp.StatusCode)
		}
	}
	if lim, learned := effectiveLimit(t, b.a, "vox", "tts"); lim != 6 || learned {
		t.Fatalf("tts after refused reports: %v %v, want the configured 6", lim, learned)
	}
	if n := b.leases.LimitAlerts(); n != 1 {
		t.Fatalf("LimitAlerts %d, want 1", n)
	}
}

// Bad reports are 400 naming the field (or 404, 405, 415), and change
// nothing.
func TestHTTPRefusalBadRequests(t *testing.T) {
	t.Parallel()
	b := refusalSetup(t, httpapi.Options{})
	for _, c := range []struct {
		path, body string
		code       int
		typ, field string
	}{
		{"/v1/providers/vox/stt/refusals", `{}`, 400, "invalid_request", "in_use"},
		{"/v1/providers/vox/stt/refusals", `{"in_use": null}`, 400, "invalid_request", "in_use"},
		{"/v1/providers/vox/stt/refusals", `{"in_use": 0}`, 400, "invalid_request", "in_use"},
		{"/v1/providers/vox/stt/refusals", `{"in_use": -3}`, 400, "invalid_request", "in_use"},
		{"/v1/providers/vox/stt/refusals", `{"in_use": 1000001}`, 400, "invalid_request", "in_use"},
		{"/v1/providers/vox/stt/refusals", `{"in_use": 1e30}`, 400, "invalid_request", "in_use"},
		{"/v1/providers/vox/stt/refusals", `{"in_use": 2.5}`, 400, "invalid_request", "in_use"},
		{"/v1/providers/vox/stt/refusals", `{"in_use": "7"}`, 400, "invalid_request", "in_use"},
		{"/v1/providers/vox/stt/refusals", `{"in_use": 3, "in_use": 2}`, 400, "invalid_request", "in_use"},
		{"/v1/providers/vox/stt/refusals", `{"in_use": 3, "inUse": 2}`, 400, "invalid_request", "inUse"},
		{"/v1/providers/vox/stt/refusals", `[3]`, 400, "invalid_request", ""},
		{"/v1/providers/vox/asr/refusals", `{"in_use": 3}`, 400, "invalid_request", "kind"},
		{"/v1/providers/vo%7Bx/stt/refusals", `{"in_use": 3}`, 400, "invalid_request", "provider"},
		{"/v1/providers/nobody/stt/refusals", `{"in_use": 3}`, 404, "not_found", ""},
		{"/v1/providers/vox/stt/refusal", `{"in_use": 3}`, 404, "not_found", ""},
	} {
		code, got, _ := b.a.do(t, "POST", c.path, c.body)
		if code != c.code || errType(got) != c.typ || (c.field != "" && errField(got, "field") != c.field) {
			t.Errorf("POST %s %s: %d %v, want %d %s naming %q", c.path, c.body, code, got, c.code, c.typ, c.field)
		}
	}
	if code, got, hdr := b.a.do(t, "GET", "/v1/providers/vox/stt/refusals", ""); code != 405 || hdr.Get("Allow") != "POST" {
		t.Errorf("GET: %d %v", code, got)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, b.a.url+"/v1/providers/vox/stt/refusals", strings.NewReader(`{"in_use": 3}`))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Authorization", "Bearer tok-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: %d, want 415", resp.StatusCode)
	}
	big := `{"in_use": 3` + strings.Repeat(" ", httpapi.MaxBodyDefault) + `}`
	if code, got, _ := b.a.do(t, "POST", "/v1/providers/vox/stt/refusals", big); code != 413 {
		t.Errorf("a body over 64 KiB: %d %v, want 413", code, got)
	}
	for _, kind := range []string{"stt", "tts"} {
		if lim, learned := effectiveLimit(t, b.a, "vox", kind); learned || lim != map[string]float64{"stt": 10, "tts": 6}[kind] {
			t.Fatalf("vox/%s after bad reports: %v %v, want the configured limit", kind, lim, learned)
		}
	}
	if n := b.leases.LimitAlerts(); n != 0 {
		t.Fatalf("LimitAlerts %d, want 0", n)
	}
}

// With Redis unreachable a report answers 200 failed with the limits
// unknown (null), never 5xx, like the rest of the call path.
func TestHTTPRefusalRedisDown(t *testing.T) {
	t.Parallel()
	rdb := failFastClient(t, "redis://127.0.0.1:1/0")
	b := httpServe(t, rdb, "unreachable", httpapi.Options{}, false)
	code, got, _ := b.do(t, "POST", "/v1/providers/vox/stt/refusals", `{"in_use": 1}`)
	if code != 200 || got["failed"] != true || got["lowered"] != false || got["limit_before"] != nil || got["limit_after"] != nil ||
		got["configured_limit"] != 2.0 {
		t.Fatalf("report with Redis down: %d %v", code, got)
	}
	if _, ok := got["limit_before"]; !ok {
		t.Fatalf("limit_before absent, want null: %v", got)
	}
}
