package statuspage_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/statuspage"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func demo() statuspage.Snapshot {
	return statuspage.Snapshot{
		At: t0,
		Recordings: []statuspage.RecordingCount{
			{Tenant: "northline", Lane: "immediate", State: "committed", Count: 7},
			{Tenant: "northline", Lane: "immediate", State: "retry_wait", Count: 2},
			{Tenant: "acme", Lane: "batch", State: "received", Count: 3},
		},
		Cooldowns: []statuspage.Cooldown{{Scope: "generic-http:northline", Deadline: t0.Add(90 * time.Second),
			Cause: "retry-after: 429 Too Many Requests", Window: &statuspage.Window{Size: 1, Phase: "probe"}}},
		Providers: []statuspage.Provider{{Provider: "deepgram", Kind: "stt", InUse: 3, ConfiguredLimit: 4, EffectiveLimit: 4,
			Peaks: []statuspage.MinutePeak{{Minute: t0.Add(-2 * time.Minute), Peak: 2}, {Minute: t0.Add(-time.Minute), Peak: 5}, {Minute: t0, Peak: 3}}}},
		Outbox: statuspage.Outbox{Pending: 4, OldestAge: 75 * time.Second, Delivered: 10, Dead: 1},
		Batch: statuspage.Batch{InFlight: 2, ItemsInFlight: 130, Done: 5, Recent: []statuspage.Manifest{
			{Key: "manifest:acme:generic-http:general:2", Tenant: "acme", State: "accepted", VendorBatchID: "b_9", Items: 30, Resubmission: true, Created: t0},
		}},
		Warnings:   []statuspage.Warning{{At: t0, Kind: "learned-limit", Subject: "deepgram/stt", Detail: "refused at 5 in use: limit 6 → 4"}},
		FailOpen:   []statuspage.Counter{{Name: "leases", Value: 0}, {Name: "windows", Value: 2}},
		DialQueue:  []statuspage.QueuedCall{{CallID: "out-7", Agent: "dana", QueuedAt: t0.Add(-time.Minute), WaitingFor: "provider capacity", Position: 1}},
		DialQueued: 3,
		CallEvents: []statuspage.CallEvent{{At: t0, CallID: "c-9", Kind: "voice_overflow", Provider: "v2", Detail: "voice v1 full: reply moved to fallback v2"}},
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := statuspage.Render(&b, demo(), 0); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<tr class="recording-row" data-tenant="acme" data-lane="batch">`,
		`data-state="committed">7</td>`, `<td class="n total">9</td>`,
		`<tr class="cooldown" data-scope="generic-http:northline">`, "2026-11-29 09:01:30Z", "1m30s", "retry-after: 429 Too Many Requests",
		"size 1, 0 in flight, 0 waiting (probe)",
		`data-minute="08:59" data-peak="5"`, `<line class="limit"`, `data-limit="4"`,
		`<span id="outbox-pending">4</span> pending (oldest 1m15s)`, `<span id="outbox-dead" class="bad">1</span>`,
		`<tr class="warning" data-kind="learned-limit">`, `data-name="windows">2</span>`,
		`fetch("/status/data"`,
		`<span id="dial-queued">3</span> outbound calls waiting to be dialled (the oldest 1 shown)`,
		`<tr class="queued-call" data-call="out-7"><td class="n">1</td><td>out-7</td><td>dana</td><td>2026-11-29 08:59:00Z</td><td>provider capacity</td>`,
		`<tr class="call-event" data-kind="voice_overflow">`, "voice v1 full: reply moved to fallback v2",
		`<span id="batch-in-flight">2</span> manifests in flight (130 items)`, `<span id="batch-done">5</span> done.`,
		`<tr class="manifest" data-state="accepted"><td>manifest:acme:generic-http:general:2 (resubmission)</td><td>acme</td><td>accepted</td><td class="n">30</td><td>b_9</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %s", want)
		}
	}
	if n := strings.Count(page, `<rect class="bar`); n != 3 {
		t.Errorf("%d bars, want 3 (one per minute)", n)
	}
	if n := strings.Count(page, `<rect class="bar over"`); n != 1 {
		t.Errorf("%d bars over the limit, want 1", n)
	}
	// States in the pipeline's order, not the alphabet's.
	if i, j := strings.Index(page, "<th class=\"n\">received"), strings.Index(page, "<th class=\"n\">committed"); i < 0 || j < i {
		t.Errorf("states out of order: received at %d, committed at %d", i, j)
	}
	// No external asset: nothing but the page's own paths.
	if m := regexp.MustCompile(`(?i)(src|href)=|https?://|@import`).FindString(page); m != "" {
		t.Errorf("the page refers to something outside it: %q", m)
	}
	// Text is escaped.
	s := demo()
	s.Cooldowns[0].Cause = `<script>alert(1)</script>`
	b.Reset()
	if err := statuspage.RenderSections(&b, s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script>alert") || strings.Contains(b.String(), "<html") {
		t.Errorf("sections: unescaped text or a whole page:\n%s", b.String())
	}
}

func TestChartIsCappedToTheLatestMinutes(t *testing.T) {
	t.Parallel()
	s := demo()
	s.Providers[0].Peaks = nil
	for i := range statuspage.ChartMinutes + 30 {
		s.Providers[0].Peaks = append(s.Providers[0].Peaks, statuspage.MinutePeak{Minute: t0.Add(time.Duration(i) * time.Minute), Peak: 1})
	}
	var b strings.Builder
	if err := statuspage.RenderSections(&b, s); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), `<rect class="bar`); n != statuspage.ChartMinutes {
		t.Fatalf("%d bars, want %d", n, statuspage.ChartMinutes)
	}
	if !strings.Contains(b.String(), `data-minute="11:29"`) || strings.Contains(b.String(), `data-minute="09:29"`) {
		t.Fatal("the chart does not end with the latest minute")
	}
}

const adminToken = "the-admin-token"

type bundle struct {
	srv     *httptest.Server
	clock   *clock.Stub
	revoked map[int64]bool
	checkFn func() error
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{clock: clock.NewStub(t0), revoked: map[int64]bool{}, checkFn: func() error { return nil }}
	sessions, err := statuspage.NewSessions(time.Hour, b.clock)
	if err != nil {
		t.Fatal(err)
	}
	h, err := statuspage.New(statuspage.Config{
		Snapshot: func(context.Context) (statuspage.Snapshot, error) { return demo(), nil },
		IsAdmin: func(r *http.Request) (bool, error) {
			return r.Header.Get("Authorization") == "Bearer "+adminToken, b.checkFn()
		},
		SignIn: func(_ context.Context, tok string) (int64, bool, error) {
			return 42, tok == adminToken, b.checkFn()
		},
		StillValid: func(_ context.Context, id int64) (bool, error) { return !b.revoked[id], b.checkFn() },
		Sessions:   sessions,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", h)
	mux.Handle("/status/", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "catch-all") })
	b.srv = httptest.NewServer(mux)
	t.Cleanup(b.srv.Close)
	return b
}

func (b *bundle) get(t *testing.T, path, bearer string, cookie *http.Cookie) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, b.srv.URL+path, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (b *bundle) login(t *testing.T, token string) (int, *http.Cookie) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(b.srv.URL+statuspage.LoginPath, url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == statuspage.SessionCookie {
			return resp.StatusCode, c
		}
	}
	return resp.StatusCode, nil
}

func TestAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if code, body := b.get(t, "/", "", nil); code != 401 || !strings.Contains(body, `action="/status/login"`) {
		t.Fatalf("GET / signed out: %d, want 401 with the sign-in form\n%s", code, body)
	}
	if code, _ := b.get(t, statuspage.DataPath, "wrong", nil); code != 401 {
		t.Fatalf("GET %s with a wrong token: %d", statuspage.DataPath, code)
	}
	if code, body := b.get(t, "/", adminToken, nil); code != 200 || !strings.Contains(body, `id="sections"`) {
		t.Fatalf("GET / with the admin token: %d", code)
	}
	if code, body := b.get(t, "/v1/status", "", nil); code != 200 || body != "catch-all" {
		t.Fatalf("other paths reach the catch-all: %d %q", code, body)
	}

	if code, c := b.login(t, "wrong"); code != 401 || c != nil {
		t.Fatalf("sign in with a wrong token: %d, cookie %v", code, c)
	}
	code, c := b.login(t, adminToken)
	if code != http.StatusSeeOther || c == nil {
		t.Fatalf("sign in: %d, cookie %v", code, c)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || strings.Contains(c.Value, adminToken) {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, without the token", c)
	}
	if code, body := b.get(t, statuspage.DataPath, "", c); code != 200 || !strings.Contains(body, `id="recordings"`) || strings.Contains(body, "<html") {
		t.Fatalf("GET %s with the session: %d\n%s", statuspage.DataPath, code, body)
	}

	// A forged or altered cookie is refused.
	forged := *c
	forged.Value = strings.Replace(c.Value, "v1.42.", "v1.43.", 1)
	if code, _ := b.get(t, statuspage.DataPath, "", &forged); code != 401 {
		t.Fatalf("altered cookie: %d, want 401", code)
	}
	// Store trouble: 503, not a sign-out.
	b.checkFn = func() error { return errors.New("store down") }
	if code, _ := b.get(t, statuspage.DataPath, "", c); code != 503 {
		t.Fatalf("store down: %d, want 503", code)
	}
	b.checkFn = func() error { return nil }
	// Revoking the token ends the session at its next request.
	b.revoked[42] = true
	if code, _ := b.get(t, statuspage.DataPath, "", c); code != 401 {
		t.Fatalf("session of a revoked token: %d, want 401", code)
	}
	b.revoked[42] = false
	// It expires.
	b.clock.Advance(time.Hour)
	if code, _ := b.get(t, statuspage.DataPath, "", c); code != 401 {
		t.Fatalf("expired session: %d, want 401", code)
	}
}
