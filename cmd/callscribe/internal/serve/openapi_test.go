package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/internal/route"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/ledger"
)

// openAPITestToken is CALLSCRIBE_API_TOKEN of the OpenAPI test.
const openAPITestToken = "openapi-test-token-0123456789-abcdefghijklmnopq"

// reqRule says how a request must fare against the document.
type reqRule int

const (
	// conforms: the request must validate.
	conforms reqRule = iota
	// refused: a deliberate mistake the document must refuse too (a
	// missing credential, a field out of its range, an unknown key).
	refused
	// unchecked: a mistake the document cannot express (a tenant's
	// audio key outside its part, a cap below a campaign's), not judged.
	unchecked
)

// apiCall is one request of the OpenAPI test and the status it must get.
type apiCall struct {
	name           string
	method, target string
	// token is sent as a bearer token unless "".
	token  string
	header map[string]string
	// body is sent as application/json unless header says otherwise.
	body string
	want int
	// alsoOK: statuses accepted besides want (a pace that a slow machine
	// may have let through), validated all the same.
	alsoOK []int
	req    reqRule
	// field: the field a 400 must name.
	field string
}

// openAPIRig is a real `callscribe serve` handler over a fresh database
// (through a proxy the test can cut) and the shared Redis.
type openAPIRig struct {
	t      *testing.T
	srv    *httptest.Server
	server *Server
	doc    apiDoc
	proxy  *testdb.Proxy
	pool   *openAPIPool
	// org is the organisation, and the tenant, of the org token.
	org, provider, voice, gate string
	admin, orgTok, rival       string
	client                     *http.Client

	mu sync.Mutex
	// seen: each route's statuses; byTag: each tag's statuses.
	seen  map[string]map[int]bool
	byTag map[string]map[int]bool
	// bodies: the last JSON answer of each "METHOD path status", for the
	// renamed-field checks.
	bodies map[string]exchange
}

// openAPIPool is what the rig reads and writes behind serve's back.
type openAPIPool struct {
	ledger *ledger.Ledger
}

// setupOpenAPI serves everything `callscribe serve` mounts with
// database_url: tenants and tokens in the database, one organisation with
// a call cap of 1 (a campaign of 1), an agent with one transcriber and one
// voice of limit 1, an admission gate of size 1, the default start rate
// (1 per second per campaign) and one caller ID.
func setupOpenAPI(t *testing.T) *openAPIRig {
	t.Helper()
	ctx := context.Background()
	pool := testdb.New(t)
	proxy := testdb.NewProxy(t, pool)
	id := fmt.Sprintf("oa-%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000_000)
	r := &openAPIRig{t: t, proxy: proxy, org: id + "-org", provider: id + "-stt", voice: id + "-voice", gate: id,
		seen: map[string]map[int]bool{}, byTag: map[string]map[int]bool{}, bodies: map[string]exchange{}}
	rdb := testredis.Client(t)
	t.Cleanup(func() {
		testredis.DeleteMatching(rdb, "*{"+id+"*")
		testredis.DeleteMatching(rdb, "*{gate/"+id+"}*")
		_ = rdb.SRem(context.Background(), "callscribe:cap:{registry}:orgs", r.org).Err()
	})
	root := t.TempDir()
	wav, err := os.ReadFile("../../../../testdata/recordings/northline/call-1001.wav")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, r.org), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a.wav", "b.wav", "c.wav"} {
		// Different bytes, different recordings.
		if err := os.WriteFile(filepath.Join(root, r.org, name), append(slices.Clone(wav), byte(i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	body := fmt.Sprintf(`audio: {root: %[1]s}
tokens: {refresh_every: 10m}
pipeline:
  tenants:
    %[2]s: {provider: generic-http, base_url: 'http://127.0.0.1:9', api_key: k}
capacity:
  limits:
    %[3]s/stt: {limit: 1}
    %[4]s/tts: {limit: 1}
  orgs:
    %[2]s: {limit: 1, campaigns: {spring: 1}}
  agents:
    support: {stt: [%[3]s], tts: [%[4]s]}
  gate: {name: %[5]s, size: 1, ceilings: {vendor_plan: 2}}
`, root, r.org, r.provider, r.voice, r.gate)
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{config.EnvDatabaseURL: proxy.URL(), config.EnvRedisURL: testredis.URL(), config.EnvAPIToken: openAPITestToken}
	getenv := func(k string) string { return env[k] }
	cfg, err := config.LoadConfig(cfgPath, getenv)
	if err != nil {
		t.Fatal(err)
	}
	owner := auth.New(pool)
	mk := func(tenant string, admin bool) string {
		_, secret, err := owner.Create(ctx, tenant, "openapi", admin)
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	r.admin, r.orgTok, r.rival = mk("", true), mk(r.org, false), mk(id+"-rival", false)
	cr, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb})
	if err != nil {
		t.Fatal(err)
	}
	cids, err := capacity.NewCallerIDs(cr, capacity.CallerIDsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cids.Add(ctx, r.org, "+14155550100"); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	a := &app.App{Env: app.Env{Stdout: io.Discard, Stderr: logs, Getenv: getenv}, ConfigPath: cfgPath, Config: cfg,
		Logger: config.NewLogger(logs, cfg.Log)}
	s, err := New(ctx, Deps{App: a, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	r.server = s
	r.srv = httptest.NewServer(s.Handler())
	t.Cleanup(func() { r.srv.Close(); s.Close() })
	r.client = r.srv.Client()
	r.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.pool = &openAPIPool{ledger: l}
	r.doc = loadAPIDoc(t, nil)
	return r
}

// do sends c, validates the exchange against the document, checks the
// status (and a 400's field), records it, and returns the answer's JSON
// (nil when it is not JSON).
func (r *openAPIRig) do(c apiCall) (map[string]any, http.Header) {
	t := r.t
	t.Helper()
	hdr := http.Header{}
	if c.token != "" {
		hdr.Set("Authorization", "Bearer "+c.token)
	}
	if c.body != "" {
		hdr.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		hdr.Set(k, v)
	}
	req, err := http.NewRequestWithContext(t.Context(), c.method, r.srv.URL+c.target, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr.Clone()
	resp, err := r.client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", c.name, err)
	}
	ex := exchange{method: c.method, target: c.target, header: hdr, body: []byte(c.body), status: resp.StatusCode, respHeader: resp.Header, respBody: raw}
	var m map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(raw, &m)
	}
	if resp.StatusCode != c.want && !slices.Contains(c.alsoOK, resp.StatusCode) {
		t.Errorf("%s: %s %s: %d, want %d: %.300s", c.name, c.method, c.target, resp.StatusCode, c.want, raw)
	}
	if c.field != "" {
		e, _ := m["error"].(map[string]any)
		if e["field"] != c.field {
			t.Errorf("%s: the 400 names field %v, want %q: %s", c.name, e["field"], c.field, raw)
		}
	}
	v, err := r.doc.validate(t, ex)
	if err != nil {
		t.Errorf("%s: %s %s → %d: the answer does not conform to docs/openapi.json: %v\n%.500s", c.name, c.method, c.target, resp.StatusCode, err, raw)
		return m, resp.Header
	}
	switch {
	case c.req == conforms && v.request != nil:
		t.Errorf("%s: %s %s: the request does not conform to docs/openapi.json: %v", c.name, c.method, c.target, v.request)
	case c.req == refused && v.request == nil:
		t.Errorf("%s: %s %s: a deliberate mistake that docs/openapi.json accepts (it should refuse it as the server does)", c.name, c.method, c.target)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := v.route.Method + " " + v.route.Path
	if r.seen[key] == nil {
		r.seen[key] = map[int]bool{}
	}
	r.seen[key][resp.StatusCode] = true
	for _, tag := range v.tags {
		if r.byTag[tag] == nil {
			r.byTag[tag] = map[int]bool{}
		}
		r.byTag[tag][resp.StatusCode] = true
	}
	if k := fmt.Sprintf("%s %d", key, resp.StatusCode); m != nil && r.bodies[k].status == 0 {
		r.bodies[k] = ex // the first of each
	}
	return m, resp.Header
}

// paced sends c, a request that a pace of one per second refuses, until
// it is refused (429 with Retry-After): a slow machine may let one through
// a second after the last.
func (r *openAPIRig) paced(c apiCall) {
	r.t.Helper()
	c.want, c.alsoOK = http.StatusTooManyRequests, []int{http.StatusOK}
	for range 5 {
		got, h := r.do(c)
		if e, _ := got["error"].(map[string]any); e["type"] == "rate_limited" {
			if h.Get("Retry-After") == "" {
				r.t.Errorf("%s: 429 without Retry-After", c.name)
			}
			return
		}
	}
	r.t.Errorf("%s: never refused in 5 tries", c.name)
}

// jsonOf marshals v for a request body.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOpenAPIDocumentsEveryRoute drives every route `callscribe serve`
// mounts (its route table, Server.Routes) through the real handler over
// PostgreSQL and Redis, and validates each request and answer against
// docs/openapi.json with kin-openapi's openapi3filter: successes, and the
// main refusals of the capacity, recordings and admin APIs (400 naming
// the field, 401, 403, 404, 429 with Retry-After, 503 while the database
// is cut). A route mounted but not documented, an operation documented
// but not mounted, or a route the test does not drive to a success fails
// it; so does a renamed field (its sub-tests rename one and see the
// document refuse it).
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	r := setupOpenAPI(t)
	routes := r.server.Routes()
	if missing := r.doc.undocumented(routes); len(missing) > 0 {
		t.Errorf("routes mounted but not in docs/openapi.json: %v", missing)
	}
	if extra := r.doc.unmounted(routes); len(extra) > 0 {
		t.Errorf("operations in docs/openapi.json that serve does not mount: %v", extra)
	}

	r.driveCapacity()
	r.driveLiveCalls()
	r.driveRecordings()
	r.driveAdmin()
	r.driveOperations()
	r.driveOutage()

	// Every route was driven to a success.
	for _, rt := range routes {
		seen := r.seen[rt.Method+" "+rt.Path]
		ok := false
		for code := range seen {
			ok = ok || code < 400
		}
		if !ok {
			t.Errorf("%s: never answered a success in this test (statuses seen: %v)", rt, slices.Sorted(maps.Keys(seen)))
		}
	}
	// The main refusals of each API were met and validated.
	for _, c := range []struct {
		tags []string
		want []int
	}{
		{[]string{"capacity", "live calls"}, []int{400, 401, 403, 404, 409, 415, 429, 503}},
		{[]string{"recordings"}, []int{400, 401, 404, 409, 415, 422, 503}},
		{[]string{"admin"}, []int{400, 401, 403, 404, 503}},
		{[]string{"operations"}, []int{303, 401, 403, 503}},
	} {
		seen := map[int]bool{}
		for _, tag := range c.tags {
			maps.Copy(seen, r.byTag[tag])
		}
		for _, code := range c.want {
			if !seen[code] {
				t.Errorf("%v: no %d answer was validated (seen: %v)", c.tags, code, slices.Sorted(maps.Keys(seen)))
			}
		}
	}
	// The recordings and admin APIs never answer 429: the document says
	// so by listing none.
	for path, item := range r.doc.doc.Paths.Map() {
		for method, op := range item.Operations() {
			if (slices.Contains(op.Tags, "recordings") || slices.Contains(op.Tags, "admin")) && op.Responses.Status(429) != nil {
				t.Errorf("%s %s documents a 429 the API never answers", method, path)
			}
		}
	}

	t.Run("RenamedResponseFieldFails", r.checkRenamedFields)
	t.Run("UndocumentedRouteFails", r.checkUndocumentedRoute)
}

func (r *openAPIRig) driveCapacity() {
	t := r.t
	org, admin, tok := r.org, r.admin, r.orgTok
	acquire := jsonOf(t, map[string]string{"provider": r.provider, "kind": "stt", "holder": "call-1", "lane": "live"})
	r.do(apiCall{name: "lease without a token", method: "POST", target: "/v1/leases", body: acquire, want: 401, req: refused})
	r.do(apiCall{name: "lease with a made-up token", method: "POST", target: "/v1/leases", token: "cs_1_" + strings.Repeat("0", 64), body: acquire, want: 401})
	r.do(apiCall{name: "lease with a bad lane", method: "POST", target: "/v1/leases", token: tok, want: 400, req: refused, field: "lane",
		body: jsonOf(t, map[string]string{"provider": r.provider, "kind": "stt", "holder": "call-1", "lane": "express"})})
	r.do(apiCall{name: "lease with an unknown key", method: "POST", target: "/v1/leases", token: tok, want: 400, req: refused, field: "Lane",
		body: `{"provider":"` + r.provider + `","kind":"stt","holder":"call-1","Lane":"live"}`})
	r.do(apiCall{name: "lease as text/plain", method: "POST", target: "/v1/leases", token: tok, body: acquire, want: 415, req: refused,
		header: map[string]string{"Content-Type": "text/plain"}})
	got, _ := r.do(apiCall{name: "lease", method: "POST", target: "/v1/leases", token: tok, body: acquire, want: 200})
	lease := got["lease"]
	r.do(apiCall{name: "lease over the limit", method: "POST", target: "/v1/leases", token: tok, body: acquire, want: 200})
	r.do(apiCall{name: "lease refresh", method: "POST", target: "/v1/leases/refresh", token: tok, body: jsonOf(t, map[string]any{"leases": []any{lease}}), want: 200})
	r.do(apiCall{name: "lease refresh of another organisation's", method: "POST", target: "/v1/leases/refresh", token: r.rival,
		body: jsonOf(t, map[string]any{"leases": []any{lease}}), want: 404, field: "leases[0].id"})
	r.do(apiCall{name: "lease release", method: "POST", target: "/v1/leases/release", token: tok, body: jsonOf(t, map[string]any{"lease": lease}), want: 204})

	// Call slots: the organisation's cap is 1.
	got, _ = r.do(apiCall{name: "slot", method: "POST", target: "/v1/slots", token: tok, body: `{"org":"` + org + `","campaign":"spring"}`, want: 200})
	slot := got["slot"]
	r.do(apiCall{name: "slot over the cap", method: "POST", target: "/v1/slots", token: tok, body: `{"org":"` + org + `"}`, want: 409})
	r.do(apiCall{name: "slot of another organisation", method: "POST", target: "/v1/slots", token: r.rival, body: `{"org":"` + org + `"}`, want: 404})
	r.do(apiCall{name: "slot with a bad org id", method: "POST", target: "/v1/slots", token: tok, body: `{"org":"a b"}`, want: 400, req: refused, field: "org"})
	r.do(apiCall{name: "slot waiting too long", method: "POST", target: "/v1/slots", token: tok, body: `{"org":"` + org + `","timeout_ms":120001}`,
		want: 400, req: refused, field: "timeout_ms"})
	r.do(apiCall{name: "bind", method: "POST", target: "/v1/slots/bind", token: tok, body: jsonOf(t, map[string]any{"slot": slot, "call_id": "call-a"}), want: 204})
	r.do(apiCall{name: "call release", method: "POST", target: "/v1/calls/call-a/release", token: tok, body: `{"org":"` + org + `"}`, want: 204})
	r.do(apiCall{name: "bind of a released slot", method: "POST", target: "/v1/slots/bind", token: tok, body: jsonOf(t, map[string]any{"slot": slot, "call_id": "call-b"}), want: 409})
	got, _ = r.do(apiCall{name: "slot again", method: "POST", target: "/v1/slots", token: tok, body: `{"org":"` + org + `"}`, want: 200})
	r.do(apiCall{name: "slot release", method: "POST", target: "/v1/slots/release", token: tok, body: jsonOf(t, map[string]any{"slot": got["slot"]}), want: 204})

	// The start rate: 1 per second per campaign.
	start := `{"org":"` + org + `","campaign":"spring"}`
	r.do(apiCall{name: "start", method: "POST", target: "/v1/calls:start", token: tok, body: start, want: 200})
	r.paced(apiCall{name: "start too soon", method: "POST", target: "/v1/calls:start", token: tok, body: start})

	// The admission gate, of size 1.
	got, _ = r.do(apiCall{name: "gate enter", method: "POST", target: "/v1/gate/enter", token: tok, body: `{"call_id":"call-g"}`, want: 200})
	ticket := got["ticket"]
	r.do(apiCall{name: "gate full", method: "POST", target: "/v1/gate/enter", token: tok, body: `{"timeout_ms":0}`, want: 429})
	r.do(apiCall{name: "gate leave", method: "POST", target: "/v1/gate/leave", token: tok, body: jsonOf(t, map[string]any{"ticket": ticket}), want: 204})
	r.do(apiCall{name: "gate leave again", method: "POST", target: "/v1/gate/leave", token: tok, body: jsonOf(t, map[string]any{"ticket": ticket}), want: 404})
	r.do(apiCall{name: "gate leave with no ticket", method: "POST", target: "/v1/gate/leave", token: tok, body: `{"ticket":"x"}`, want: 400, req: refused, field: "ticket"})

	// Status, as an admin and as the organisation.
	r.do(apiCall{name: "status (admin)", method: "GET", target: "/v1/status", token: admin, want: 200})
	r.do(apiCall{name: "status (organisation)", method: "GET", target: "/v1/status", token: tok, want: 200})

	// Refusals: an organisation's report is paced.
	refusal := "/v1/providers/" + r.voice + "/tts/refusals"
	r.do(apiCall{name: "refusal", method: "POST", target: refusal, token: tok, body: `{"in_use":1}`, want: 200})
	r.paced(apiCall{name: "refusal too soon", method: "POST", target: refusal, token: tok, body: `{"in_use":1}`})
	r.do(apiCall{name: "refusal (admin)", method: "POST", target: refusal, token: admin, body: `{"in_use":1}`, want: 200})
	r.do(apiCall{name: "refusal of an unconfigured provider", method: "POST", target: "/v1/providers/nobody-" + r.gate + "/stt/refusals", token: admin, body: `{"in_use":1}`, want: 404})
	r.do(apiCall{name: "refusal with in_use 0", method: "POST", target: refusal, token: admin, body: `{"in_use":0}`, want: 400, req: refused, field: "in_use"})

	// Caller IDs: one number in the pool.
	got, _ = r.do(apiCall{name: "caller ID", method: "POST", target: "/v1/caller-ids:acquire", token: tok, body: `{"org":"` + org + `","call_id":"call-c"}`, want: 200})
	r.do(apiCall{name: "caller ID, none free", method: "POST", target: "/v1/caller-ids:acquire", token: tok, body: `{"org":"` + org + `","call_id":"call-d"}`, want: 409})
	r.do(apiCall{name: "caller IDs", method: "GET", target: "/v1/caller-ids?org=" + org, token: tok, want: 200})
	r.do(apiCall{name: "caller IDs of another organisation", method: "GET", target: "/v1/caller-ids?org=" + org, token: r.rival, want: 404})
	r.do(apiCall{name: "caller ID release, not E.164", method: "POST", target: "/v1/caller-ids:release", token: tok,
		body: jsonOf(t, map[string]any{"org": org, "number": "4155550100", "token": got["token"]}), want: 400, req: refused, field: "number"})
	r.do(apiCall{name: "caller ID release", method: "POST", target: "/v1/caller-ids:release", token: tok,
		body: jsonOf(t, map[string]any{"org": org, "number": got["number"], "token": got["token"]}), want: 204})
}

func (r *openAPIRig) driveLiveCalls() {
	t := r.t
	tok, admin := r.orgTok, r.admin
	agent := `{"agent":"support"}`
	// Dial: the transcriber's limit is 1, so a second call queues.
	r.do(apiCall{name: "dial", method: "POST", target: "/v1/calls/call-1/dial", token: tok, body: agent, want: 200})
	r.do(apiCall{name: "dial state", method: "GET", target: "/v1/calls/call-1/dial", token: tok, want: 200})
	r.do(apiCall{name: "dial of an unknown agent", method: "POST", target: "/v1/calls/call-x/dial", token: tok, body: `{"agent":"nobody"}`, want: 404, field: "agent"})
	r.do(apiCall{name: "dial with a bad call id", method: "POST", target: "/v1/calls/a%20b/dial", token: tok, body: agent, want: 400, req: refused, field: "call_id"})
	r.do(apiCall{name: "dial of another organisation's org", method: "GET", target: "/v1/calls/call-1/dial?org=" + r.gate + "-rival", token: tok, want: 404})
	r.do(apiCall{name: "dial state waiting too long", method: "GET", target: "/v1/calls/call-1/dial?wait_ms=30001", token: tok, want: 400, req: refused, field: "wait_ms"})
	r.do(apiCall{name: "dial a second call", method: "POST", target: "/v1/calls/call-2/dial", token: tok, body: agent, want: 202})
	r.do(apiCall{name: "answered while queued", method: "POST", target: "/v1/calls/call-2/answered", token: tok, want: 409})
	r.do(apiCall{name: "dial state queued", method: "GET", target: "/v1/calls/call-2/dial?wait_ms=0", token: tok, want: 202})
	r.do(apiCall{name: "dial queue", method: "GET", target: "/v1/dial-queue", token: admin, want: 200})
	r.do(apiCall{name: "dial queue (organisation)", method: "GET", target: "/v1/dial-queue", token: tok, want: 403})
	r.do(apiCall{name: "answered", method: "POST", target: "/v1/calls/call-1/answered", token: tok, want: 200})
	r.do(apiCall{name: "answered, never dialled", method: "POST", target: "/v1/calls/call-z/answered", token: tok, want: 404})
	r.do(apiCall{name: "timeline", method: "GET", target: "/v1/calls/call-1/timeline", token: tok, want: 200})
	r.do(apiCall{name: "timeline, none", method: "GET", target: "/v1/calls/call-z/timeline", token: tok, want: 404})
	r.do(apiCall{name: "ended (queued)", method: "POST", target: "/v1/calls/call-2/ended", token: tok, want: 204})
	r.do(apiCall{name: "ended", method: "POST", target: "/v1/calls/call-1/ended", token: tok, want: 204})
	r.do(apiCall{name: "dial state, ended", method: "GET", target: "/v1/calls/call-1/dial", token: tok, want: 404})

	// A transcriber and a reply's voice, outside the dial queue.
	got, _ := r.do(apiCall{name: "transcriber", method: "POST", target: "/v1/calls/call-3/transcriber", token: tok, body: agent, want: 200})
	r.do(apiCall{name: "transcriber of an unknown agent", method: "POST", target: "/v1/calls/call-3/transcriber", token: tok, body: `{"agent":"nobody"}`, want: 404})
	if l, ok := got["lease"].(map[string]any); ok {
		r.do(apiCall{name: "transcriber's lease release", method: "POST", target: "/v1/leases/release", token: tok, body: jsonOf(t, map[string]any{"lease": l}), want: 204})
	}
	got, _ = r.do(apiCall{name: "voice start", method: "POST", target: "/v1/calls/call-3/voice/start", token: tok, body: agent, want: 200})
	r.do(apiCall{name: "voice start without an agent", method: "POST", target: "/v1/calls/call-3/voice/start", token: tok, body: `{}`, want: 400, req: refused, field: "agent"})
	r.do(apiCall{name: "voice done", method: "POST", target: "/v1/calls/call-3/voice/done", token: tok, body: jsonOf(t, map[string]any{"lease": got["lease"]}), want: 204})
	r.do(apiCall{name: "voice done of another organisation's lease", method: "POST", target: "/v1/calls/call-3/voice/done", token: r.rival,
		body: jsonOf(t, map[string]any{"lease": got["lease"]}), want: 404, field: "lease.id"})
}

func (r *openAPIRig) driveRecordings() {
	t := r.t
	tok, admin, org := r.orgTok, r.admin, r.org
	item := func(call, audio string) map[string]any {
		return map[string]any{"call_id": call, "audio": org + "/" + audio, "lane": "immediate"}
	}
	r.do(apiCall{name: "recording without a token", method: "POST", target: "/v1/recordings", body: jsonOf(t, item("call-1", "a.wav")), want: 401, req: refused})
	got, _ := r.do(apiCall{name: "recording", method: "POST", target: "/v1/recordings", token: tok, body: jsonOf(t, item("call-1", "a.wav")), want: 201})
	rec, _ := got["recording"].(map[string]any)
	r.do(apiCall{name: "recording again", method: "POST", target: "/v1/recordings", token: tok, body: jsonOf(t, item("call-1", "a.wav")), want: 200})
	r.do(apiCall{name: "recording without call_id", method: "POST", target: "/v1/recordings", token: tok, body: `{"audio":"` + org + `/a.wav"}`, want: 400, req: refused, field: "call_id"})
	r.do(apiCall{name: "recording of a bad lane", method: "POST", target: "/v1/recordings", token: tok,
		body: `{"call_id":"c","audio":"` + org + `/a.wav","lane":"express"}`, want: 400, req: refused, field: "lane"})
	r.do(apiCall{name: "recording outside the tenant's audio", method: "POST", target: "/v1/recordings", token: tok,
		body: jsonOf(t, map[string]any{"call_id": "c", "audio": "other/a.wav"}), want: 400, req: unchecked, field: "audio"})
	r.do(apiCall{name: "recording of another tenant", method: "POST", target: "/v1/recordings", token: tok,
		body: jsonOf(t, map[string]any{"tenant_id": "someone-else", "call_id": "c", "audio": org + "/a.wav"}), want: 404})
	r.do(apiCall{name: "recording of missing audio", method: "POST", target: "/v1/recordings", token: tok, body: jsonOf(t, item("call-9", "missing.wav")), want: 422})
	r.do(apiCall{name: "recording as text/plain", method: "POST", target: "/v1/recordings", token: tok, body: jsonOf(t, item("call-1", "a.wav")), want: 415, req: refused,
		header: map[string]string{"Content-Type": "text/plain"}})
	r.do(apiCall{name: "batch", method: "POST", target: "/v1/recordings:batch", token: tok, want: 200,
		body: jsonOf(t, map[string]any{"items": []any{item("call-2", "b.wav"), item("call-3", "missing.wav"), map[string]any{"call_id": "call-4", "audio": "other/c.wav"}}})})
	r.do(apiCall{name: "batch of none", method: "POST", target: "/v1/recordings:batch", token: tok, body: `{"items":[]}`, want: 400, req: refused, field: "items"})
	got, _ = r.do(apiCall{name: "list", method: "GET", target: "/v1/recordings?limit=1&lane=immediate", token: tok, want: 200})
	cursor, _ := got["next_cursor"].(string)
	if cursor == "" {
		t.Errorf("list of one of two recordings: no next_cursor: %v", got)
	}
	r.do(apiCall{name: "list, next page", method: "GET", target: "/v1/recordings?limit=1&cursor=" + url.QueryEscape(cursor), token: tok, want: 200})
	r.do(apiCall{name: "list (admin)", method: "GET", target: "/v1/recordings?tenant=" + org, token: admin, want: 200})
	r.do(apiCall{name: "list (admin) without a tenant", method: "GET", target: "/v1/recordings", token: admin, want: 400, req: unchecked, field: "tenant"})
	r.do(apiCall{name: "list of a bad state", method: "GET", target: "/v1/recordings?state=done", token: tok, want: 400, req: refused, field: "state"})
	r.do(apiCall{name: "list with limit 0", method: "GET", target: "/v1/recordings?limit=0", token: tok, want: 400, req: refused, field: "limit"})
	r.do(apiCall{name: "by call", method: "GET", target: "/v1/recordings/call-1", token: tok, want: 200})
	r.do(apiCall{name: "by call, another tenant's", method: "GET", target: "/v1/recordings/call-1", token: r.rival, want: 404})

	// Retry: a tenant's token cannot; an expired recording is eligible again.
	id, _ := rec["id"].(string)
	retry := "/v1/recordings/" + id + ":retry"
	r.do(apiCall{name: "retry (tenant)", method: "POST", target: retry, token: tok, want: 404})
	r.do(apiCall{name: "retry of a recording not reviewable", method: "POST", target: retry, token: admin, want: 409})
	r.do(apiCall{name: "retry of an unknown recording", method: "POST", target: "/v1/recordings/" + uuid.NewString() + ":retry", token: admin, want: 404})
	if u, err := uuid.Parse(id); err == nil {
		cur, err := r.pool.ledger.Recording(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.pool.ledger.Transition(t.Context(), ledger.Transition{RecordingID: u, From: cur.State, To: ledger.StateExpired, Reason: "openapi test"}); err != nil {
			t.Fatal(err)
		}
	}
	r.do(apiCall{name: "retry", method: "POST", target: retry, token: admin, want: 200})
}

func (r *openAPIRig) driveAdmin() {
	t := r.t
	admin, org := r.admin, r.org
	r.do(apiCall{name: "admin orgs without a token", method: "GET", target: "/v1/admin/orgs", want: 401, req: refused})
	r.do(apiCall{name: "admin orgs with a tenant's token", method: "GET", target: "/v1/admin/orgs", token: r.orgTok, want: 403})
	r.do(apiCall{name: "admin org, none stored", method: "GET", target: "/v1/admin/orgs/" + org, token: admin, want: 404})
	r.do(apiCall{name: "admin org set", method: "PUT", target: "/v1/admin/orgs/" + org, token: admin, body: `{"limit":2,"reason":"pilot"}`, want: 200})
	r.do(apiCall{name: "admin org set with the environment's token", method: "PUT", target: "/v1/admin/orgs/" + org, token: openAPITestToken, body: `{"limit":3}`, want: 200})
	r.do(apiCall{name: "admin org set to 0", method: "PUT", target: "/v1/admin/orgs/" + org, token: admin, body: `{"limit":0}`, want: 400, req: refused, field: "limit"})
	r.do(apiCall{name: "admin org set without a limit", method: "PUT", target: "/v1/admin/orgs/" + org, token: admin, body: `{"reason":"x"}`, want: 400, req: refused, field: "limit"})
	r.do(apiCall{name: "admin org of a bad id", method: "PUT", target: "/v1/admin/orgs/a%7Db", token: admin, body: `{"limit":1}`, want: 400, req: refused, field: "org"})
	r.do(apiCall{name: "admin campaign set", method: "PUT", target: "/v1/admin/orgs/" + org + "/campaigns/spring", token: admin, body: `{"limit":2}`, want: 200})
	r.do(apiCall{name: "admin org set below its campaign", method: "PUT", target: "/v1/admin/orgs/" + org, token: admin, body: `{"limit":1}`, want: 400, req: unchecked, field: "limit"})
	r.do(apiCall{name: "admin orgs", method: "GET", target: "/v1/admin/orgs", token: admin, want: 200})
	r.do(apiCall{name: "admin org", method: "GET", target: "/v1/admin/orgs/" + org, token: admin, want: 200})
	r.do(apiCall{name: "admin campaign", method: "GET", target: "/v1/admin/orgs/" + org + "/campaigns/spring", token: admin, want: 200})
	r.do(apiCall{name: "admin campaign, none stored", method: "GET", target: "/v1/admin/orgs/" + org + "/campaigns/autumn", token: admin, want: 404})
	r.do(apiCall{name: "admin cap changes", method: "GET", target: "/v1/admin/cap-changes?org=" + org + "&limit=10", token: admin, want: 200})
	r.do(apiCall{name: "admin cap changes, limit 0", method: "GET", target: "/v1/admin/cap-changes?limit=0", token: admin, want: 400, req: refused, field: "limit"})
	_ = t
}

func (r *openAPIRig) driveOperations() {
	t := r.t
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:"+openAPITestToken))
	r.do(apiCall{name: "healthz", method: "GET", target: "/healthz", want: 200})
	r.do(apiCall{name: "readyz", method: "GET", target: "/readyz", want: 200})
	r.do(apiCall{name: "metrics", method: "GET", target: "/metrics", token: r.admin, want: 200})
	r.do(apiCall{name: "metrics with a tenant's token", method: "GET", target: "/metrics", token: r.orgTok, want: 401})
	r.do(apiCall{name: "River UI", method: "GET", target: "/riverui/", token: r.admin, want: 200})
	r.do(apiCall{name: "River UI, the browser's Basic password", method: "GET", target: "/riverui/", header: map[string]string{"Authorization": basic}, want: 200})
	r.do(apiCall{name: "River UI without a token", method: "GET", target: "/riverui/", want: 401, req: refused})
	r.do(apiCall{name: "status page", method: "GET", target: "/", token: openAPITestToken, want: 200})
	r.do(apiCall{name: "status page without a token", method: "GET", target: "/", want: 401, req: refused})
	r.do(apiCall{name: "status sections", method: "GET", target: "/status/data", token: r.admin, want: 200})
	r.do(apiCall{name: "status sections with a tenant's token", method: "GET", target: "/status/data", token: r.orgTok, want: 401})
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	r.do(apiCall{name: "sign-in with a tenant's token", method: "POST", target: "/status/login", header: form, body: "token=" + url.QueryEscape(r.orgTok), want: 401})
	r.do(apiCall{name: "sign-in from another origin", method: "POST", target: "/status/login", body: "token=x", want: 403,
		header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://127.0.0.2:1"}})
	_, h := r.do(apiCall{name: "sign-in", method: "POST", target: "/status/login", header: form, body: "token=" + url.QueryEscape(r.admin), want: 303})
	var cookie string
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == "callscribe_status" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("sign-in set no session cookie: %v", h)
	}
	r.do(apiCall{name: "status page, signed in", method: "GET", target: "/", header: map[string]string{"Cookie": cookie}, want: 200})
	r.do(apiCall{name: "sign-in page", method: "GET", target: "/status/login", want: 303})
	r.do(apiCall{name: "sign-out", method: "POST", target: "/status/logout", header: map[string]string{"Cookie": cookie}, want: 303})

	// The document the server answers is docs/openapi.json, byte for byte.
	resp, err := r.client.Get(r.srv.URL + OpenAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	file, err := os.ReadFile("../../../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served, file) {
		t.Errorf("GET %s does not answer docs/openapi.json byte for byte (%d bytes, the file %d)", OpenAPIPath, len(served), len(file))
	}
	r.do(apiCall{name: "openapi.json", method: "GET", target: OpenAPIPath, want: 200})
}

// driveOutage cuts the database away: what needs it answers 503 (with
// Retry-After where the document says so), the capacity API keeps
// serving the tokens it read.
func (r *openAPIRig) driveOutage() {
	t := r.t
	r.proxy.Cut()
	defer r.proxy.Restore()
	unknown := "cs_999999999_" + strings.Repeat("ab", 32)
	check := func(name string, h http.Header) {
		if h.Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", name)
		}
	}
	_, h := r.do(apiCall{name: "status with an unknown token, database cut", method: "GET", target: "/v1/status", token: unknown, want: 503})
	check("capacity", h)
	r.do(apiCall{name: "status with a known token, database cut", method: "GET", target: "/v1/status", token: r.orgTok, want: 200})
	_, h = r.do(apiCall{name: "recordings, database cut", method: "GET", target: "/v1/recordings", token: r.orgTok, want: 503})
	check("recordings", h)
	_, h = r.do(apiCall{name: "admin orgs, database cut", method: "GET", target: "/v1/admin/orgs", token: r.admin, want: 503})
	check("admin", h)
	r.do(apiCall{name: "River UI, database cut", method: "GET", target: "/riverui/", token: r.admin, want: 503})
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	unready := func() bool {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, r.srv.URL+"/readyz", nil)
		resp, err := r.client.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}
	if !testwait.Until(30*time.Second, tick.C, unready) {
		t.Fatal("/readyz still ready with the database cut")
	}
	r.do(apiCall{name: "readyz, database cut", method: "GET", target: "/readyz", want: 503})
}

// checkRenamedFields renames a field of answers the server gave and sees
// the document refuse each; an added field is refused too.
func (r *openAPIRig) checkRenamedFields(t *testing.T) {
	for _, c := range []struct {
		key, from, to string
	}{
		{"POST /v1/leases 200", "granted", "grant"},
		{"POST /v1/leases 200", "expires", "expiry"},
		{"POST /v1/slots 409", "org_limit", "org_max"},
		{"POST /v1/calls:start 429", "limited_by", "limitedBy"},
		{"GET /v1/status 200", "auth_failures", "auth_failure"},
		{"POST /v1/recordings 201", "business_key", "key"},
		{"GET /v1/recordings/{call_id} 200", "new_state", "state_new"},
		{"GET /v1/recordings 200", "business_key", "key"},
		{"POST /v1/recordings 400", "field", "fields"},
		{"PUT /v1/admin/orgs/{org} 200", "prior_limit", "previous_limit"},
		{"GET /v1/admin/cap-changes 200", "by", "who"},
		{"GET /readyz 200", "postgres", "pg"},
	} {
		ex, ok := r.bodies[c.key]
		if !ok {
			t.Errorf("%s: no answer recorded", c.key)
			continue
		}
		if err := r.validateAnswer(t, ex); err != nil {
			t.Fatalf("%s: the recorded answer does not validate: %v", c.key, err)
		}
		bad := ex
		bad.respBody = renamed(t, ex.respBody, c.from, c.to)
		if err := r.validateAnswer(t, bad); err == nil {
			t.Errorf("%s with %q renamed %q: docs/openapi.json accepts it", c.key, c.from, c.to)
		}
	}
	ex := r.bodies["POST /v1/leases 200"]
	var m map[string]any
	_ = json.Unmarshal(ex.respBody, &m)
	m["granted_at"] = "now"
	ex.respBody = []byte(jsonOf(t, m))
	if err := r.validateAnswer(t, ex); err == nil {
		t.Errorf("POST /v1/leases 200 with a field added: docs/openapi.json accepts it")
	}
}

// validateAnswer validates ex's answer alone.
func (r *openAPIRig) validateAnswer(t *testing.T, ex exchange) error {
	t.Helper()
	_, err := r.doc.validate(t, ex)
	return err
}

// checkUndocumentedRoute: a route the document lacks is reported, by the
// same check the test makes of serve's route table.
func (r *openAPIRig) checkUndocumentedRoute(t *testing.T) {
	routes := append(r.server.Routes(), route.Route{Method: http.MethodGet, Path: "/v1/not-documented"})
	if got := r.doc.undocumented(routes); !slices.Equal(got, []string{"GET /v1/not-documented"}) {
		t.Errorf("a mounted route missing from the document: reported %v", got)
	}
	// And with an operation removed from the document.
	var raw map[string]any
	if err := json.Unmarshal(loadFile(t), &raw); err != nil {
		t.Fatal(err)
	}
	delete(raw["paths"].(map[string]any), "/v1/gate/leave")
	d := loadAPIDoc(t, []byte(jsonOf(t, raw)))
	if got := d.undocumented(r.server.Routes()); !slices.Equal(got, []string{"POST /v1/gate/leave"}) {
		t.Errorf("POST /v1/gate/leave removed from the document: reported %v", got)
	}
}

func loadFile(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
