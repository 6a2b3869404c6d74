package sttsim

import (
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestCooldownEnforced checks the quota window: after a 429, every
// submission of the scope is refused, with the remaining time, until the
// deadline; other scopes are unaffected; replays are refused too.
func TestCooldownEnforced(t *testing.T) {
	t.Parallel()
	src := newScriptedSource()
	b := setup(t, Config{APIKeys: []string{"key-a", "key-b"}, RateLimitShare: 0.5, Cooldown: 2 * time.Second, Rand: rand.New(src)})
	a := bearer("key-a")

	resp, data := b.submit("before", remoteBody(1), a)
	wantStatus(t, resp, data, http.StatusOK)

	src.Push(yes)
	resp, data = b.submit("first-429", remoteBody(2), a)
	wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
	if ra := resp.Header.Get("Retry-After"); ra != "2" {
		t.Fatalf("Retry-After %q, want 2", ra)
	}
	deadline := epoch.Add(2 * time.Second)

	steps := []struct {
		at   time.Duration // since epoch
		want string        // Retry-After of the refusal
	}{
		{0, "2"},
		{500 * time.Millisecond, "2"},
		{1100 * time.Millisecond, "1"},
		{2*time.Second - 1, "1"},
	}
	for i, s := range steps {
		b.clock.Advance(epoch.Add(s.at).Sub(b.clock.Now()))
		for _, sub := range []struct {
			key  string
			body map[string]any
		}{{"during-" + strconv.Itoa(i), remoteBody(byte(10 + i))}, {"before", remoteBody(1)}} { // a replay is refused too
			resp, data = b.submit(sub.key, sub.body, a)
			wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
			if ra := resp.Header.Get("Retry-After"); ra != s.want {
				t.Errorf("at %v: Retry-After %q, want %q", s.at, ra, s.want)
			}
		}
		// Other scopes: the same key with another model, another key.
		resp, data = b.submit("other-model-"+strconv.Itoa(i), mergeBody(remoteBody(3), "model", "phone-call"), a)
		wantStatus(t, resp, data, http.StatusOK)
		resp, data = b.submit("other-key-"+strconv.Itoa(i), remoteBody(4), bearer("key-b"))
		wantStatus(t, resp, data, http.StatusOK)
		// Reads are never throttled.
		resp, data = b.do(http.MethodGet, "/v1/transcriptions?idempotency_key=before", nil, a)
		wantStatus(t, resp, data, http.StatusOK)
	}

	b.clock.Advance(deadline.Sub(b.clock.Now()))
	resp, data = b.submit("after", remoteBody(5), a)
	wantStatus(t, resp, data, http.StatusOK)
	resp, data = b.submit("first-429", remoteBody(2), a) // the refused key is free
	wantStatus(t, resp, data, http.StatusOK)

	st := b.sim.Stats()
	scopeA := Scope{APIKey: "key-a", Model: "general"}
	if st.RateLimited != 9 || len(st.Cooldowns) != 1 || st.Cooldowns[0].Answers != 9 || !st.Cooldowns[0].Deadline.Equal(deadline) {
		t.Errorf("rate limited %d, cooldowns %+v", st.RateLimited, st.Cooldowns)
	}
	if st.SubmissionsByScope[scopeA] != 12 || st.SubmissionsByScope[Scope{"key-a", "phone-call"}] != 4 ||
		st.SubmissionsByScope[Scope{"key-b", "general"}] != 4 || st.Submissions != 20 {
		t.Errorf("submissions %d by scope %v", st.Submissions, st.SubmissionsByScope)
	}
	if len(st.Violations) != 8 { // every refused arrival after the announcement, none saying when it was admitted
		t.Errorf("violations %d, want 8", len(st.Violations))
	}
	if n := b.sim.Transcriptions("before"); n != 1 {
		t.Errorf("before transcribed %d times", n)
	}
}

// mergeBody is body with field set to value.
func mergeBody(body map[string]any, field string, value any) map[string]any {
	out := map[string]any{}
	for k, v := range body {
		out[k] = v
	}
	out[field] = value
	return out
}

// TestViolationAccounting checks the in-flight rule: an arrival during an
// announced cooldown is allowed when X-Admitted-At is not after the
// announcement, and a violation otherwise.
func TestViolationAccounting(t *testing.T) {
	t.Parallel()
	src := newScriptedSource()
	b := setup(t, Config{RateLimitShare: 0.5, Cooldown: 10 * time.Second, Rand: rand.New(src)})
	announced := b.clock.Advance(time.Second)
	src.Push(yes)
	b.submit("announcer", remoteBody(1))
	deadline := announced.Add(10 * time.Second)
	b.clock.Advance(3 * time.Second)

	admitted := func(d time.Duration) header {
		return header{"X-Admitted-At", announced.Add(d).Format(time.RFC3339Nano)}
	}
	cases := []struct {
		key       string
		header    header
		violation bool
	}{
		{"in-flight", admitted(-2 * time.Second), false},
		{"in-flight-1ns", admitted(-1), false},
		{"same-instant", admitted(0), false},
		{"offset-zone", header{"X-Admitted-At", announced.Add(-time.Millisecond).In(time.FixedZone("", -5*3600)).Format(time.RFC3339Nano)}, false},
		{"after-1ns", admitted(1), true},
		{"after", admitted(2 * time.Second), true},
		{"no-header", header{"X-Admitted-At", ""}, true},
		{"malformed", header{"X-Admitted-At", "yesterday"}, true},
		{"not-rfc3339", header{"X-Admitted-At", announced.Add(-time.Second).Format(time.RFC1123)}, true},
	}
	for _, c := range cases {
		resp, data := b.submit(c.key, remoteBody(2), c.header)
		wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited) // in flight or not, the quota is spent
	}
	b.clock.Advance(deadline.Sub(b.clock.Now()))
	resp, data := b.submit("at-deadline", remoteBody(3), admitted(time.Second))
	wantStatus(t, resp, data, http.StatusOK)

	st := b.sim.Stats()
	arrivals := map[string]Arrival{}
	for _, a := range st.Arrivals {
		arrivals[a.IdempotencyKey] = a
	}
	violations := map[string]Violation{}
	for _, v := range st.Violations {
		violations[v.IdempotencyKey] = v
	}
	for _, c := range cases {
		a := arrivals[c.key]
		if a.Violation != c.violation || a.InFlight == c.violation || a.Status != http.StatusTooManyRequests || a.AdmittedAtHeader != c.header.value {
			t.Errorf("%s: arrival %+v, want violation %v", c.key, a, c.violation)
		}
		v, ok := violations[c.key]
		if ok != c.violation {
			t.Errorf("%s: in violations %v, want %v", c.key, ok, c.violation)
			continue
		}
		if ok && (!v.AnnouncedAt.Equal(announced) || !v.Deadline.Equal(deadline) || !v.ArrivedAt.Equal(announced.Add(3*time.Second)) ||
			v.Scope != (Scope{APIKeyDefault, ModelDefault}) || v.AdmittedAtHeader != c.header.value) {
			t.Errorf("%s: violation %+v", c.key, v)
		}
	}
	if v := violations["after"]; !v.AdmittedAt.Equal(announced.Add(2 * time.Second)) {
		t.Errorf("after: AdmittedAt %v", v.AdmittedAt)
	}
	if v := violations["malformed"]; !v.AdmittedAt.IsZero() {
		t.Errorf("malformed: AdmittedAt %v, want zero", v.AdmittedAt)
	}
	if a := arrivals["at-deadline"]; a.Violation || a.InFlight || a.Status != http.StatusOK {
		t.Errorf("at the deadline: %+v", a)
	}
	if len(st.Violations) != 5 {
		t.Errorf("%d violations, want 5", len(st.Violations))
	}
}

// TestUnavailable checks 503: on a submission with a header it starts a
// cooldown, without one it does not; on a read it carries the header and
// starts nothing.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	src := newScriptedSource()
	b := setup(t, Config{UnavailableShare: 0.5, Cooldown: 5 * time.Second, Rand: rand.New(src)})
	src.Push(yes)
	resp, data := b.submit("k1", remoteBody(1))
	wantError(t, resp, data, http.StatusServiceUnavailable, errUnavailable)
	if resp.Header.Get("Retry-After") != "5" {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	resp, data = b.submit("k1", remoteBody(1))
	wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
	if resp.Header.Get("Retry-After") != "5" {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	b.clock.Advance(5 * time.Second)
	resp, data = b.submit("k1", remoteBody(1))
	wantStatus(t, resp, data, http.StatusOK)
	id := decode[wireTranscription](t, data).ID

	for _, path := range []string{"/v1/transcriptions/" + id, "/v1/transcriptions?idempotency_key=k1", "/v1/batches/b_x"} {
		src.Push(yes)
		resp, data = b.do(http.MethodGet, path, nil)
		wantError(t, resp, data, http.StatusServiceUnavailable, errUnavailable)
		if resp.Header.Get("Retry-After") != "5" {
			t.Errorf("%s: Retry-After %q", path, resp.Header.Get("Retry-After"))
		}
	}
	resp, data = b.submit("k2", remoteBody(2))
	wantStatus(t, resp, data, http.StatusOK)
	st := b.sim.Stats()
	if st.Unavailable != 4 || st.RateLimited != 1 || len(st.Cooldowns) != 1 || st.Cooldowns[0].Status != http.StatusServiceUnavailable {
		t.Errorf("stats %+v", st)
	}
	// k1's second submission arrived after the 503 announced the cooldown,
	// without X-Admitted-At.
	if len(st.Violations) != 1 || st.Violations[0].IdempotencyKey != "k1" {
		t.Errorf("violations %+v", st.Violations)
	}
}

func TestUnannouncedCooldownHasNoViolations(t *testing.T) {
	t.Parallel()
	for _, form := range []RetryAfterForm{FormNone, FormMalformed} {
		src := newScriptedSource()
		b := setup(t, Config{RetryAfterForm: form, RateLimitShare: 0.5, Rand: rand.New(src)})
		src.Push(yes)
		b.submit("k1", remoteBody(1))
		for i := range 3 {
			b.clock.Advance(500 * time.Millisecond)
			resp, data := b.submit("k1", remoteBody(1))
			wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
			_ = i
		}
		b.clock.Advance(500 * time.Millisecond)
		resp, data := b.submit("k1", remoteBody(1))
		wantStatus(t, resp, data, http.StatusOK)
		st := b.sim.Stats()
		if len(st.Violations) != 0 || st.Cooldowns[0].Announced() || st.Cooldowns[0].Answers != 4 {
			t.Errorf("%s: violations %+v, cooldowns %+v", form, st.Violations, st.Cooldowns)
		}
	}
}

// TestTroubleSeedKeysTheDraw: under Config.TroubleSeed, which submissions
// are refused (and the form of the cooldown each starts) depends on the
// key and its attempt, not on arrival order or on other traffic; without
// it, arrival order decides.
func TestTroubleSeedKeysTheDraw(t *testing.T) {
	t.Parallel()
	type outcome struct {
		status int
		form   RetryAfterForm
	}
	run := func(seed uint64, keys []string, attempts int) map[string]outcome {
		b := setup(t, Config{RateLimitShare: 0.3, UnavailableShare: 0.1, RetryAfterForm: FormMixed, Cooldown: time.Second,
			TroubleSeed: seed, Rand: rand.New(rand.NewPCG(uint64(len(keys)), 7))})
		got := map[string]outcome{}
		for a := range attempts {
			for i, k := range keys {
				b.clock.Advance(2 * time.Second) // past any cooldown
				before := len(b.sim.Stats().Cooldowns)
				resp, data := b.submit(k, remoteBody(byte(i)))
				o := outcome{status: resp.StatusCode}
				if st := b.sim.Stats(); len(st.Cooldowns) > before {
					o.form = st.Cooldowns[before].Form
				} else if resp.StatusCode == http.StatusOK && len(data) == 0 {
					t.Fatal("empty answer")
				}
				got[k+"#"+strconv.Itoa(a)] = o
			}
		}
		return got
	}
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	reversed := slices.Clone(keys)
	slices.Reverse(reversed)
	one, two := run(42, keys, 6), run(42, append(reversed, "extra-1", "extra-2"), 6)
	refused := 0
	for k, o := range one {
		if two[k] != o {
			t.Errorf("%s: %+v in one order, %+v in another", k, o, two[k])
		}
		if o.status != http.StatusOK {
			refused++
		}
	}
	if refused == 0 || refused == len(one) {
		t.Fatalf("%d of %d refused: the draw decides nothing", refused, len(one))
	}
	if other := run(43, keys, 6); maps.Equal(other, one) {
		t.Error("another TroubleSeed drew the same trouble")
	}
}
