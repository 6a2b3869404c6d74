package crmsim

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/crm"
)

// TestApplyReplayConflict: a key is applied once (201), the same body again
// is a replay (200, the original id), other content is a conflict (409).
func TestApplyReplayConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	body := goldenBody(t)

	a := b.post(body, header{"X-Delivery-Attempt", "3"})
	if a.Status != http.StatusCreated {
		t.Fatalf("first delivery: %d %s", a.Status, a.Body)
	}
	var ok successBody
	a.decode(t, &ok)
	if ok.ID != "crm_1" || ok.AppliedAt != "2026-11-29T17:04:06Z" {
		t.Errorf("201 body %+v", ok)
	}
	if ct := a.Header.Get("Content-Type"); ct != contentType {
		t.Errorf("Content-Type %q", ct)
	}

	b.clock.Advance(time.Hour)
	a = b.post(body)
	var again successBody
	a.decode(t, &again)
	if a.Status != http.StatusOK || again != ok {
		t.Errorf("replay: %d %+v, want 200 %+v", a.Status, again, ok)
	}

	// The same content with the fields in another order, other white
	// space, an unknown field and committed_at spelled +00:00 is the same
	// body.
	var generic map[string]any
	_ = json.Unmarshal(body, &generic) // re-marshalled with sorted keys
	generic["committed_at"] = "2026-11-29T17:04:05+00:00"
	generic["x_future_field"] = map[string]any{"anything": []int{1, 2}}
	reordered, _ := json.MarshalIndent(generic, "", "    ")
	if a = b.post(reordered); a.Status != http.StatusOK {
		t.Errorf("reordered body: %d %s, want 200", a.Status, a.Body)
	}

	// Other content under the same key.
	changed := bytes.Replace(body, []byte("2026-12-04"), []byte("2026-12-05"), 1)
	a = b.post(changed)
	if a.Status != http.StatusConflict || a.errorType(t) != errIdempotencyKeyReused || !strings.Contains(string(a.Body), "crm_1") {
		t.Errorf("changed body: %d %s, want 409 idempotency_key_reused", a.Status, a.Body)
	}
	// Another window offset for the same instant is other content: the
	// local time is what the CRM shows.
	shifted := bytes.Replace(body, []byte("2026-12-02T08:00:00-06:00"), []byte("2026-12-02T14:00:00Z"), 1)
	if a = b.post(shifted); a.Status != http.StatusConflict {
		t.Errorf("shifted window: %d, want 409", a.Status)
	}

	// A second key is a second application.
	s2 := testSet()
	s2.ActionVersion = 2
	body2 := mustJSON(t, s2)
	if a = b.post(body2, header{"Idempotency-Key", "t1:call-42:2"}); a.Status != http.StatusCreated {
		t.Errorf("version 2: %d %s", a.Status, a.Body)
	}

	st := b.sim.Stats()
	if st.Deliveries != 6 || st.Applied != 2 || st.Replays != 2 || st.Conflicts != 2 {
		t.Errorf("stats %+v", st)
	}
	if st.ApplyCount["t1:call-42:1"] != 1 || st.ApplyCount["t1:call-42:2"] != 1 || len(st.ApplyCount) != 2 {
		t.Errorf("ApplyCount %v", st.ApplyCount)
	}
	if !bytes.Equal(st.Bodies["t1:call-42:1"], body) {
		t.Errorf("stored body %s", st.Bodies["t1:call-42:1"])
	}
	if len(st.Arrivals) != 6 || st.Arrivals[0].Attempt != 3 || st.Arrivals[0].Status != 201 || st.Arrivals[0].Key != "t1:call-42:1" {
		t.Errorf("arrivals %+v", st.Arrivals)
	}

	sets := b.sim.ActionSets()
	if len(sets) != 2 || sets[0].IdempotencyKey() != "t1:call-42:1" || sets[1].ActionVersion != 2 {
		t.Fatalf("ActionSets %+v", sets)
	}
	if !bytes.Equal(mustJSON(t, sets[0]), mustJSON(t, testSet())) {
		t.Errorf("held set\n%s\nwant\n%s", mustJSON(t, sets[0]), mustJSON(t, testSet()))
	}
	// A copy: changing it does not change the CRM.
	sets[0].Actions[1].Lanes[0] = "changed"
	sets[0].Actions[2].Window.Start = time.Time{}
	if id, held, ok := b.sim.Applied("t1:call-42:1"); !ok || id != "crm_1" || held.Actions[1].Lanes[0] != "Chicago to Dallas" || held.Actions[2].Window.Start.IsZero() {
		t.Errorf("Applied: %q %+v %v", id, held, ok)
	}
	if _, _, ok := b.sim.Applied("t1:call-42:9"); ok {
		t.Error("Applied found a key never delivered")
	}
}

// TestRefusals drives the checks before anything is applied: token,
// headers, body and fields.
func TestRefusals(t *testing.T) {
	t.Parallel()
	golden := goldenBody(t)
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(golden, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	action := func(i int, f func(a map[string]any)) []byte {
		return edit(func(m map[string]any) { f(m["actions"].([]any)[i].(map[string]any)) })
	}
	tests := []struct {
		name    string
		body    []byte
		headers []header
		status  int
		typ     string
		message string
	}{
		{"no token", golden, []header{{"Authorization", ""}}, 401, errUnauthorized, "Bearer"},
		{"wrong token", golden, []header{{"Authorization", "Bearer nope"}}, 401, errUnauthorized, ""},
		{"basic auth", golden, []header{{"Authorization", "Basic " + TokenDefault}}, 401, errUnauthorized, ""},
		{"no key", golden, []header{{"Idempotency-Key", ""}}, 400, errInvalidRequest, "Idempotency-Key"},
		{"no attempt", golden, []header{{"X-Delivery-Attempt", ""}}, 400, errInvalidRequest, "X-Delivery-Attempt"},
		{"attempt 0", golden, []header{{"X-Delivery-Attempt", "0"}}, 400, errInvalidRequest, "X-Delivery-Attempt"},
		{"attempt not a number", golden, []header{{"X-Delivery-Attempt", "first"}}, 400, errInvalidRequest, "X-Delivery-Attempt"},
		{"not JSON", []byte("tenant_id=t1"), nil, 400, errInvalidRequest, "JSON"},
		{"a JSON array", []byte("[1]"), nil, 400, errInvalidRequest, "JSON object"},
		{"trailing garbage", append(bytes.Clone(golden), "}"...), nil, 400, errInvalidRequest, ""},
		{"too large", bytes.Repeat([]byte(" "), MaxBodyBytes+1), nil, 400, errInvalidRequest, "at most"},
		{"version a string", edit(func(m map[string]any) { m["action_version"] = "1" }), nil, 422, errInvalidRequest, "action_version must be a JSON number"},
		{"lanes a string", action(1, func(a map[string]any) { a["lanes"] = "Chicago to Dallas" }), nil, 422, errInvalidRequest, "must be a JSON array"},
		{"no tenant", edit(func(m map[string]any) { delete(m, "tenant_id") }), nil, 422, errInvalidRequest, "tenant_id"},
		{"empty call", edit(func(m map[string]any) { m["call_id"] = "" }), nil, 422, errInvalidRequest, "call_id"},
		{"version 0", edit(func(m map[string]any) { m["action_version"] = 0 }), nil, 422, errInvalidRequest, "action_version"},
		{"no sha", edit(func(m map[string]any) { delete(m, "recording_sha256") }), nil, 422, errInvalidRequest, "recording_sha256"},
		{"no committed_at", edit(func(m map[string]any) { delete(m, "committed_at") }), nil, 422, errInvalidRequest, "committed_at"},
		{"committed_at not UTC", edit(func(m map[string]any) { m["committed_at"] = "2026-11-29T11:04:05-06:00" }), nil, 422, errInvalidRequest, "UTC"},
		{"committed_at a date", edit(func(m map[string]any) { m["committed_at"] = "2026-11-29" }), nil, 422, errInvalidRequest, "RFC 3339"},
		{"no actions", edit(func(m map[string]any) { m["actions"] = []any{} }), nil, 422, errInvalidRequest, "call_note"},
		{"no call_note", edit(func(m map[string]any) { m["actions"] = m["actions"].([]any)[1:] }), nil, 422, errInvalidRequest, "exactly one call_note"},
		{"two call_notes", edit(func(m map[string]any) { a := m["actions"].([]any); m["actions"] = append(a, a[0]) }), nil, 422, errInvalidRequest, "exactly one call_note, not 2"},
		{"unknown kind", action(3, func(a map[string]any) { a["kind"] = "send_flowers" }), nil, 422, errInvalidRequest, `actions[3]: unknown kind "send_flowers"`},
		{"no kind", action(3, func(a map[string]any) { delete(a, "kind") }), nil, 422, errInvalidRequest, "kind is required"},
		{"bad due", action(1, func(a map[string]any) { a["due"] = "Dec 1" }), nil, 422, errInvalidRequest, "due"},
		{"no lanes", action(1, func(a map[string]any) { delete(a, "lanes") }), nil, 422, errInvalidRequest, "lanes"},
		{"no shipment_ref", action(2, func(a map[string]any) { delete(a, "shipment_ref") }), nil, 422, errInvalidRequest, "shipment_ref"},
		{"no window", action(2, func(a map[string]any) { delete(a, "window") }), nil, 422, errInvalidRequest, "window"},
		{"window not RFC 3339", action(2, func(a map[string]any) { a["window"] = map[string]any{"start": "8am", "end": "noon"} }), nil, 422, errInvalidRequest, "RFC 3339"},
		{"window backwards", action(2, func(a map[string]any) {
			a["window"] = map[string]any{"start": "2026-12-02T12:00:00-06:00", "end": "2026-12-02T08:00:00-06:00"}
		}), nil, 422, errInvalidRequest, "ends before"},
		{"bad next-call date", action(3, func(a map[string]any) { a["date"] = "2026-12-4" }), nil, 422, errInvalidRequest, "date"},
		{"key of another set", golden, []header{{"Idempotency-Key", "t1:call-42:2"}}, 422, errInvalidRequest, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			a := b.post(tt.body, tt.headers...)
			var e errorBody
			a.decode(t, &e)
			if a.Status != tt.status || e.Error.Type != tt.typ || !strings.Contains(e.Error.Message, tt.message) {
				t.Errorf("got %d %s, want %d %s containing %q", a.Status, a.Body, tt.status, tt.typ, tt.message)
			}
			if tt.status == 401 && a.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			st := b.sim.Stats()
			if st.Applied != 0 || len(b.sim.ActionSets()) != 0 || st.Deliveries != 1 {
				t.Errorf("stats after a refusal: %+v", st)
			}
			if (tt.status == 401) != (st.Unauthorized == 1) || (tt.status != 401) != (st.Invalid == 1) {
				t.Errorf("Unauthorized %d, Invalid %d", st.Unauthorized, st.Invalid)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, tt := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/v1/action-sets", 405, "POST"},
		{http.MethodPut, "/v1/action-sets", 405, "POST"},
		{http.MethodPost, "/v1/action-sets/t1", 404, ""},
		{http.MethodGet, "/", 404, ""},
	} {
		req, _ := http.NewRequest(tt.method, b.ts.URL+tt.path, nil)
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tt.status || resp.Header.Get("Allow") != tt.allow || resp.Header.Get("Content-Type") != contentType {
			t.Errorf("%s %s: %d Allow %q", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	if st := b.sim.Stats(); st.Deliveries != 0 {
		t.Errorf("Deliveries %d, want 0", st.Deliveries)
	}
}

// TestRateLimitCooldown: a 429 starts a cooldown of its token only; until
// the deadline every delivery of the token gets 429 with the time left.
func TestRateLimitCooldown(t *testing.T) {
	t.Parallel()
	src := newScriptedSource()
	b := setup(t, Config{Tokens: []string{"tok-a", "tok-b"}, RateLimitShare: 0.5, Cooldown: 3 * time.Second, Rand: rand.New(src)})
	body := goldenBody(t)
	asA := header{"Authorization", "Bearer tok-a"}
	asB := header{"Authorization", "Bearer tok-b"}

	src.Push(yes)
	a := b.post(body, asA)
	if a.Status != 429 || a.Header.Get("Retry-After") != "3" || a.errorType(t) != errRateLimited {
		t.Fatalf("first: %d Retry-After %q %s", a.Status, a.Header.Get("Retry-After"), a.Body)
	}
	b.clock.Advance(1500 * time.Millisecond)
	if a = b.post(body, asA); a.Status != 429 || a.Header.Get("Retry-After") != "2" { // 1.5s left, rounded up
		t.Errorf("in cooldown: %d Retry-After %q", a.Status, a.Header.Get("Retry-After"))
	}
	if a = b.post(body, asB); a.Status != 201 {
		t.Errorf("another token: %d, want 201", a.Status)
	}
	b.clock.Advance(1500 * time.Millisecond)
	if a = b.post(body, asA); a.Status != 200 { // applied through tok-b already: a replay
		t.Errorf("after the cooldown: %d %s, want 200", a.Status, a.Body)
	}
	st := b.sim.Stats()
	if st.RateLimited != 2 || st.Cooldowns != 1 || st.Applied != 1 || st.Replays != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestRetryAfterForms(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		form RetryAfterForm
		want []string
	}{
		{FormSeconds, []string{"2", "2"}},
		{FormIMFFixdate, []string{"Sun, 29 Nov 2026 17:04:09 GMT", "Sun, 29 Nov 2026 17:04:09 GMT"}}, // 17:04:08.25 rounded up
		{FormNone, []string{"", ""}},
		{FormMalformed, []string{"soon", "2 seconds"}},
	} {
		b := setup(t, Config{RateLimitShare: 1, RetryAfterForm: tt.form})
		for i, want := range tt.want {
			a := b.post(goldenBody(t))
			if a.Status != 429 || a.Header.Get("Retry-After") != want {
				t.Errorf("%s #%d: %d Retry-After %q, want %q", tt.form, i, a.Status, a.Header.Get("Retry-After"), want)
			}
			if _, present := a.Header["Retry-After"]; present != (want != "") {
				t.Errorf("%s #%d: header present %v", tt.form, i, present)
			}
		}
	}
}

// TestServerErrors: ServerErrorShare answers 500, 502, 503 with a
// Retry-After, or 504, and applies nothing.
func TestServerErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{ServerErrorShare: 1})
	seen := map[int]int{}
	for range 40 {
		a := b.post(goldenBody(t))
		seen[a.Status]++
		if (a.Status == 503) != (a.Header.Get("Retry-After") == "2") {
			t.Errorf("%d with Retry-After %q", a.Status, a.Header.Get("Retry-After"))
		}
		if typ := a.errorType(t); typ != errServerError && typ != errUnavailable {
			t.Errorf("%d of type %q", a.Status, typ)
		}
	}
	for _, status := range []int{500, 502, 503, 504} {
		if seen[status] == 0 {
			t.Errorf("no %d in 40 answers: %v", status, seen)
		}
	}
	if len(seen) != 4 {
		t.Errorf("statuses %v", seen)
	}
	if st := b.sim.Stats(); st.ServerErrors != 40 || st.Applied != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg   Config
		field string
	}{
		{Config{Tokens: []string{"a", ""}}, "Config.Tokens[1]"},
		{Config{RateLimitShare: 1.5}, "Config.RateLimitShare"},
		{Config{ServerErrorShare: -0.1}, "Config.ServerErrorShare"},
		{Config{DropAfterApplyShare: 2}, "Config.DropAfterApplyShare"},
		{Config{Cooldown: -time.Second}, "Config.Cooldown"},
		{Config{Latency: -time.Second}, "Config.Latency"},
		{Config{RetryAfterForm: "rfc850"}, "Config.RetryAfterForm"},
	} {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tt.cfg, err, tt.field)
		}
	}
	c := Config{}.WithDefaults()
	if len(c.Tokens) != 1 || c.Tokens[0] != TokenDefault || c.Cooldown != CooldownDefault || c.RetryAfterForm != FormSeconds || c.Clock == nil || c.Rand == nil || c.Logger == nil {
		t.Errorf("defaults %+v", c)
	}
	// The default clock (clock.System) keeps time.Now's zone; the server
	// stamps in UTC.
	sim, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if now := sim.now(); now.Location() != time.UTC || time.Since(now) > time.Minute {
		t.Errorf("default clock says %v", now)
	}
}

// TestActionSetsDecoded: what the CRM holds is the set as sent, with its
// times as instants and offsets.
func TestActionSetsDecoded(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if a := b.post(goldenBody(t)); a.Status != 201 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	held := b.sim.ActionSets()[0]
	want := testSet()
	if !held.CommittedAt.Equal(want.CommittedAt) || held.CommittedAt.Location() != time.UTC {
		t.Errorf("committed_at %v", held.CommittedAt)
	}
	w := held.Actions[2].Window
	if _, off := w.Start.Zone(); off != -6*3600 || !w.Start.Equal(want.Actions[2].Window.Start) {
		t.Errorf("window %+v", w)
	}
	if held.Actions[0].Kind != crm.KindCallNote || held.Actions[0].Text != want.Actions[0].Text ||
		held.Actions[3].Date != "2026-12-04" || held.Actions[1].Due != "2026-12-01" || held.Actions[1].Lanes[0] != "Chicago to Dallas" {
		t.Errorf("actions %+v", held.Actions)
	}
}
