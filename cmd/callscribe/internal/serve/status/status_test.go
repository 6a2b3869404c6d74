package status_test

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

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/status"
	"github.com/callscribe/callscribe/internal/testdb"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func demo() status.Snapshot {
	return status.Snapshot{
		At: t0,
		Recordings: []status.RecordingCount{
			{Tenant: "northline", Lane: "immediate", State: "committed", Count: 7},
			{Tenant: "northline", Lane: "immediate", State: "retry_wait", Count: 2},
			{Tenant: "acme", Lane: "batch", State: "received", Count: 3},
		},
		Cooldowns: []status.Cooldown{{Scope: "generic-http:northline", Deadline: t0.Add(90 * time.Second),
			Cause: "retry-after: 429 Too Many Requests", Window: &status.Window{Size: 1, Phase: "probe"}}},
		Cohorts: []status.Cohort{{Cohort: "default", Mode: "observe", Default: true, Tenants: []string{"acme", "northline"}},
			{Cohort: "early", Mode: "enforce", Tenants: []string{"ridgeway"}}},
		Providers: []status.Provider{{Provider: "deepgram", Kind: "stt", InUse: 3, ConfiguredLimit: 4, EffectiveLimit: 4,
			Peaks: []status.MinutePeak{{Minute: t0.Add(-2 * time.Minute), Peak: 2}, {Minute: t0.Add(-time.Minute), Peak: 5}, {Minute: t0, Peak: 3}}}},
		Outbox: status.Outbox{Pending: 4, OldestAge: 75 * time.Second, Delivered: 10, Dead: 1},
		Batch: status.Batch{InFlight: 2, ItemsInFlight: 130, Done: 5, Recent: []status.Manifest{
			{Key: "manifest:acme:generic-http:general:2", Tenant: "acme", State: "accepted", VendorBatchID: "b_9", Items: 30, Resubmission: true, Created: t0},
		}},
		Warnings:   []status.Warning{{At: t0, Kind: "learned-limit", Subject: "deepgram/stt", Detail: "refused at 5 in use: limit 6 → 4"}},
		FailOpen:   []status.Counter{{Name: "leases", Value: 0}, {Name: "windows", Value: 2}},
		DialQueue:  []status.QueuedCall{{CallID: "out-7", Agent: "dana", QueuedAt: t0.Add(-time.Minute), WaitingFor: "provider capacity", Position: 1}},
		DialQueued: 3,
		CallEvents: []status.CallEvent{{At: t0, CallID: "c-9", Kind: "voice_overflow", Provider: "v2", Detail: "voice v1 full: reply moved to fallback v2"}},
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := status.Render(&b, demo(), 0); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<tr class="recording-row" data-tenant="acme" data-lane="batch">`,
		`data-state="committed">7</td>`, `<td class="n total">9</td>`,
		`<tr class="cooldown" data-scope="generic-http:northline">`, "2026-11-29 09:01:30Z", "1m30s", "retry-after: 429 Too Many Requests",
		"size 1, 0 in flight, 0 waiting (probe)",
		`<tr class="cohort" data-cohort="default" data-mode="observe"><td>default</td>
<td>observe <span class="muted">(default)</span></td><td>acme, northline</td></tr>`,
		`<tr class="cohort" data-cohort="early" data-mode="enforce"><td>early</td>
<td>enforce</td><td>ridgeway</td></tr>`,
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
	if err := status.RenderSections(&b, s); err != nil {
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
	for i := range status.ChartMinutes + 30 {
		s.Providers[0].Peaks = append(s.Providers[0].Peaks, status.MinutePeak{Minute: t0.Add(time.Duration(i) * time.Minute), Peak: 1})
	}
	var b strings.Builder
	if err := status.RenderSections(&b, s); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), `<rect class="bar`); n != status.ChartMinutes {
		t.Fatalf("%d bars, want %d", n, status.ChartMinutes)
	}
	if !strings.Contains(b.String(), `data-minute="11:29"`) || strings.Contains(b.String(), `data-minute="09:29"`) {
		t.Fatal("the chart does not end with the latest minute")
	}
}

const adminToken = "the-admin-token"

// bundle is a status page on a real database: its sessions are kept by
// the runtime role, as serve's are.
type bundle struct {
	srv     *httptest.Server
	clock   *clock.Stub
	owner   *pgxpool.Pool // the database's owner, to look at the table
	runtime *pgxpool.Pool // what the page's sessions act as
	revoked map[int64]bool
	checkFn func() error
}

// pageOpts: how setup makes the page.
type pageOpts struct {
	secure status.SecureCookies
	tls    bool
	// owner and runtime: another process on the same database; nil: a
	// database of its own.
	owner, runtime *pgxpool.Pool
}

func setup(t *testing.T) *bundle { return setupWith(t, pageOpts{}) }

func setupWith(t *testing.T, o pageOpts) *bundle {
	t.Helper()
	b := &bundle{clock: clock.NewStub(time.Now().UTC().Truncate(time.Second)), revoked: map[int64]bool{},
		checkFn: func() error { return nil }, owner: o.owner, runtime: o.runtime}
	if b.owner == nil {
		b.owner = testdb.New(t)
		b.runtime = testdb.AsRuntime(t, b.owner)
	}
	sessions, err := status.NewSessions(b.runtime, time.Hour, b.clock)
	if err != nil {
		t.Fatal(err)
	}
	h, err := status.New(status.Config{
		Snapshot: func(context.Context) (status.Snapshot, error) { return demo(), nil },
		IsAdmin: func(r *http.Request) (bool, error) {
			return r.Header.Get("Authorization") == "Bearer "+adminToken, b.checkFn()
		},
		SignIn: func(_ context.Context, tok string) (int64, bool, error) {
			return 42, tok == adminToken, b.checkFn()
		},
		StillValid:    func(_ context.Context, id int64) (bool, error) { return !b.revoked[id], b.checkFn() },
		Sessions:      sessions,
		SecureCookies: o.secure,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", h)
	mux.Handle("/status/", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "catch-all") })
	if o.tls {
		b.srv = httptest.NewTLSServer(mux)
	} else {
		b.srv = httptest.NewServer(mux)
	}
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
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// post POSTs form to path with cookie (nil: none) and headers (name,
// value, ...) and returns the status and the session cookie it set, if
// any.
func (b *bundle) post(t *testing.T, path string, form url.Values, cookie *http.Cookie, headers ...string) (int, *http.Cookie) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	client := *b.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == status.SessionCookie {
			return resp.StatusCode, c
		}
	}
	return resp.StatusCode, nil
}

func (b *bundle) login(t *testing.T, token string, headers ...string) (int, *http.Cookie) {
	t.Helper()
	return b.post(t, status.LoginPath, url.Values{"token": {token}}, nil, headers...)
}

func (b *bundle) logout(t *testing.T, cookie *http.Cookie, headers ...string) (int, *http.Cookie) {
	t.Helper()
	return b.post(t, status.LogoutPath, nil, cookie, headers...)
}

// sessions counts the rows of statuspage_sessions.
func (b *bundle) sessions(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.owner.QueryRow(t.Context(), `SELECT count(*) FROM statuspage_sessions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if code, body := b.get(t, "/", "", nil); code != 401 || !strings.Contains(body, `action="/status/login"`) {
		t.Fatalf("GET / signed out: %d, want 401 with the sign-in form\n%s", code, body)
	}
	// The sign-in form's POST carries the page's Origin only under a
	// Referrer-Policy other than no-referrer (which sends "Origin: null").
	resp, err := b.srv.Client().Get(b.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if p := resp.Header.Get("Referrer-Policy"); p != "same-origin" {
		t.Fatalf("Referrer-Policy %q, want same-origin", p)
	}
	if code, _ := b.get(t, status.DataPath, "wrong", nil); code != 401 {
		t.Fatalf("GET %s with a wrong token: %d", status.DataPath, code)
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
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || strings.Contains(c.Value, adminToken) {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP (auto), without the token", c)
	}
	if code, body := b.get(t, status.DataPath, "", c); code != 200 || !strings.Contains(body, `id="recordings"`) || strings.Contains(body, "<html") {
		t.Fatalf("GET %s with the session: %d\n%s", status.DataPath, code, body)
	}

	// A forged or altered cookie is refused.
	forged := *c
	last := "A"
	if strings.HasSuffix(c.Value, last) {
		last = "B"
	}
	forged.Value = c.Value[:len(c.Value)-1] + last
	if code, _ := b.get(t, status.DataPath, "", &forged); code != 401 {
		t.Fatalf("altered cookie: %d, want 401", code)
	}
	// So is another spelling of the same id: the last character with its
	// padding bits (base64's two low bits of a 32-byte id's last
	// character) changed decodes to the same bytes unless decoded
	// strictly.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	respelled := *c
	lastIndex := strings.IndexByte(alphabet, c.Value[len(c.Value)-1])
	respelled.Value = c.Value[:len(c.Value)-1] + string(alphabet[lastIndex^1])
	if code, _ := b.get(t, status.DataPath, "", &respelled); code != 401 {
		t.Fatalf("the session id respelled in its padding bits: %d, want 401", code)
	}
	// Store trouble: 503, not a sign-out.
	b.checkFn = func() error { return errors.New("store down") }
	if code, _ := b.get(t, status.DataPath, "", c); code != 503 {
		t.Fatalf("store down: %d, want 503", code)
	}
	b.checkFn = func() error { return nil }
	// Revoking the token ends the session at its next request.
	b.revoked[42] = true
	if code, _ := b.get(t, status.DataPath, "", c); code != 401 {
		t.Fatalf("session of a revoked token: %d, want 401", code)
	}
	b.revoked[42] = false
	// It expires.
	b.clock.Advance(time.Hour)
	if code, _ := b.get(t, status.DataPath, "", c); code != 401 {
		t.Fatalf("expired session: %d, want 401", code)
	}
	// The sessions' database down: 503, not a sign-out, and a sign-out
	// that cannot be recorded keeps the cookie.
	b.clock.Advance(-time.Hour)
	b.runtime.Close()
	if code, _ := b.get(t, status.DataPath, "", c); code != 503 {
		t.Fatalf("sessions' database down: %d, want 503", code)
	}
	if code, cleared := b.logout(t, c); code != 503 || cleared != nil {
		t.Fatalf("sign-out with the sessions' database down: %d, cookie %v; want 503 and the cookie kept", code, cleared)
	}
}

// A copy of the session cookie (stolen, or left in another browser) is
// refused once its session signed out: the sign-out ends the session on
// the server, not only in the browser that sent it.
func TestAttackSignOutEndsCopiedSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, c := b.login(t, adminToken)
	if code != http.StatusSeeOther || c == nil {
		t.Fatalf("sign in: %d, cookie %v", code, c)
	}
	copied := *c
	if code, _ := b.get(t, status.DataPath, "", &copied); code != 200 {
		t.Fatalf("the copied cookie before sign-out: %d, want 200", code)
	}
	code, cleared := b.logout(t, c, "Origin", b.srv.URL, "Sec-Fetch-Site", "same-origin")
	if code != http.StatusSeeOther || cleared == nil || cleared.MaxAge >= 0 {
		t.Fatalf("sign out: %d, cookie %+v; want 303 clearing the cookie", code, cleared)
	}
	if code, body := b.get(t, "/", "", &copied); code != 401 || !strings.Contains(body, `action="/status/login"`) {
		t.Fatalf("GET / with the copied cookie after sign-out: %d, want 401 with the sign-in form", code)
	}
	if code, _ := b.get(t, status.DataPath, "", &copied); code != 401 {
		t.Fatalf("GET %s with the copied cookie after sign-out: %d, want 401", status.DataPath, code)
	}
	if n := b.sessions(t); n != 0 {
		t.Fatalf("%d sessions recorded after the only one signed out, want 0", n)
	}
}

// Sessions are the database's, not a process's: a browser signed in
// through one serve process is signed in at every other, and signing out
// at one signs it out at all.
func TestSessionsAreSharedByProcesses(t *testing.T) {
	t.Parallel()
	a := setup(t)
	b := setupWith(t, pageOpts{owner: a.owner, runtime: a.runtime})
	_, c := a.login(t, adminToken)
	if c == nil {
		t.Fatal("no session cookie")
	}
	if code, _ := b.get(t, status.DataPath, "", c); code != 200 {
		t.Fatalf("the session at another process: %d, want 200", code)
	}
	if code, _ := b.logout(t, c); code != http.StatusSeeOther {
		t.Fatalf("sign out at the other process: %d", code)
	}
	if code, _ := a.get(t, status.DataPath, "", c); code != 401 {
		t.Fatalf("the session where it began, after signing out at another process: %d, want 401", code)
	}
}

// The Secure attribute follows status_page.secure_cookies: always marks
// the cookie Secure even on plain HTTP (serve behind a proxy that ends
// TLS), never leaves it off even over TLS, auto follows the connection's
// own TLS state and ignores X-Forwarded-Proto.
func TestAttackSecureCookiesSetting(t *testing.T) {
	t.Parallel()
	owner := testdb.New(t)
	runtime := testdb.AsRuntime(t, owner)
	for _, tc := range []struct {
		secure  status.SecureCookies
		tls     bool
		headers []string
		want    bool
	}{
		{secure: status.SecureAlways, want: true},
		{secure: status.SecureNever, want: false},
		{secure: status.SecureNever, tls: true, want: false},
		{secure: status.SecureAuto, tls: true, want: true},
		{secure: status.SecureAuto, want: false},
		{secure: status.SecureAuto, headers: []string{"X-Forwarded-Proto", "https"}, want: false},
	} {
		b := setupWith(t, pageOpts{secure: tc.secure, tls: tc.tls, owner: owner, runtime: runtime})
		code, c := b.login(t, adminToken, tc.headers...)
		if code != http.StatusSeeOther || c == nil {
			t.Fatalf("%s (TLS %v): sign in: %d, cookie %v", tc.secure, tc.tls, code, c)
		}
		if c.Secure != tc.want {
			t.Errorf("%s (TLS %v, %v): the session cookie's Secure is %v, want %v", tc.secure, tc.tls, tc.headers, c.Secure, tc.want)
		}
		code, cleared := b.logout(t, c, tc.headers...)
		if code != http.StatusSeeOther || cleared == nil || cleared.Secure != tc.want {
			t.Errorf("%s (TLS %v): sign out: %d, cookie %+v; want Secure %v", tc.secure, tc.tls, code, cleared, tc.want)
		}
	}
	if _, err := status.New(status.Config{
		Snapshot:   func(context.Context) (status.Snapshot, error) { return demo(), nil },
		IsAdmin:    func(*http.Request) (bool, error) { return false, nil },
		SignIn:     func(context.Context, string) (int64, bool, error) { return 0, false, nil },
		StillValid: func(context.Context, int64) (bool, error) { return false, nil },
		Sessions:   &status.Sessions{}, SecureCookies: "sometimes",
	}); err == nil {
		t.Error("SecureCookies \"sometimes\" accepted")
	}
}

// Another site cannot sign a browser in (to a session of its choosing) or
// out: a sign-in or sign-out whose Origin is not the page's, or whose
// Sec-Fetch-Site is neither same-origin nor none, is refused with 403 and
// changes nothing. A request with neither header (curl) is allowed.
func TestAttackCrossOriginSignInAndSignOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, h := range [][]string{
		{"Origin", "https://evil.example"},
		{"Origin", "null"},
		{"Origin", "https://" + b.srv.Listener.Addr().String()}, // the page is http here
		{"Origin", b.srv.URL + "/status/login"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", b.srv.URL, "Sec-Fetch-Site", "cross-site"},
	} {
		if code, c := b.login(t, adminToken, h...); code != http.StatusForbidden || c != nil {
			t.Errorf("sign in with %v: %d, cookie %v; want 403 and no cookie", h, code, c)
		}
	}
	if n := b.sessions(t); n != 0 {
		t.Fatalf("%d sessions recorded by refused sign-ins, want 0", n)
	}

	code, c := b.login(t, adminToken, "Origin", b.srv.URL, "Sec-Fetch-Site", "same-origin")
	if code != http.StatusSeeOther || c == nil {
		t.Fatalf("same-origin sign in: %d, cookie %v", code, c)
	}
	for _, h := range [][]string{{"Origin", "https://evil.example"}, {"Sec-Fetch-Site", "cross-site"}} {
		if code, cleared := b.logout(t, c, h...); code != http.StatusForbidden || cleared != nil {
			t.Errorf("sign out with %v: %d, cookie %v; want 403 and the cookie untouched", h, code, cleared)
		}
	}
	if code, _ := b.get(t, status.DataPath, "", c); code != 200 {
		t.Fatalf("after the refused sign-outs: %d, want 200 (still signed in)", code)
	}
	// Typed into the address bar, or without either header: allowed.
	if code, c := b.login(t, adminToken, "Sec-Fetch-Site", "none"); code != http.StatusSeeOther || c == nil {
		t.Fatalf("sign in with Sec-Fetch-Site: none: %d, cookie %v", code, c)
	}
	if code, _ := b.logout(t, c); code != http.StatusSeeOther {
		t.Fatalf("sign out without Origin or Sec-Fetch-Site: %d", code)
	}
	if code, _ := b.get(t, status.DataPath, "", c); code != 401 {
		t.Fatalf("after signing out: %d, want 401", code)
	}

	// Behind a proxy that ends TLS (secure_cookies: always), the page's
	// origin is https.
	p := setupWith(t, pageOpts{secure: status.SecureAlways, owner: b.owner, runtime: b.runtime})
	host := p.srv.Listener.Addr().String()
	if code, c := p.login(t, adminToken, "Origin", "http://"+host); code != http.StatusForbidden || c != nil {
		t.Errorf("secure_cookies always, Origin http://: %d, cookie %v; want 403", code, c)
	}
	if code, c := p.login(t, adminToken, "Origin", "https://"+host, "Sec-Fetch-Site", "same-origin"); code != http.StatusSeeOther || c == nil {
		t.Errorf("secure_cookies always, Origin https://: %d, cookie %v; want 303 and a session", code, c)
	}
}

// The runtime role records and reads sessions but cannot delete or change
// one itself; it deletes through the two functions only, and the prune
// takes the database's clock, so no caller can make it end a live session.
func TestAttackRuntimeCannotRewriteSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	_, c := b.login(t, adminToken)
	if c == nil {
		t.Fatal("no session cookie")
	}
	for _, stmt := range []string{
		`DELETE FROM statuspage_sessions`,
		`UPDATE statuspage_sessions SET expires_at = expires_at + interval '1 year'`,
		`UPDATE statuspage_sessions SET token_id = 0`,
		`TRUNCATE statuspage_sessions`,
	} {
		_, err := b.runtime.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("as the runtime role, %s: %v, want 42501", stmt, err)
		}
	}
	var n int
	if err := b.runtime.QueryRow(ctx, `SELECT statuspage_sessions_prune()`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("prune with a live session: %d deleted, %v; want 0", n, err)
	}
	if code, _ := b.get(t, status.DataPath, "", c); code != 200 {
		t.Fatalf("the session after the attempts: %d, want 200", code)
	}
}

// Expired sessions are deleted at the next sign-in, by the database's
// clock: the table stays bounded by the sign-ins of one TTL.
func TestExpiredSessionsArePruned(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.owner.Exec(t.Context(), `INSERT INTO statuspage_sessions (id_sha256, token_id, created_at, expires_at)
		SELECT sha256(i::text::bytea), 42, now() - interval '2 days', now() - interval '1 day' FROM generate_series(1, 50) i`); err != nil {
		t.Fatal(err)
	}
	if _, c := b.login(t, adminToken); c == nil {
		t.Fatal("no session cookie")
	}
	if n := b.sessions(t); n != 1 {
		t.Fatalf("%d sessions after a sign-in over 50 expired ones, want 1", n)
	}
}
