package sttsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callscribe/callscribe/internal/simserver"
)

// overLimitBody is the body of every 429 over Config.MaxInFlight.
const overLimitBody = `{"error":{"type":"rate_limited","message":"too many concurrent requests"}}`

var defaultScope = Scope{APIKey: APIKeyDefault, Model: ModelDefault}

// wantOverLimit fails the test unless the answer is the 429 over the
// in-flight limit, with a Retry-After for which ok holds.
func wantOverLimit(t *testing.T, resp answer, body []byte, ok func(retryAfter string) bool) {
	t.Helper()
	wantStatus(t, resp, body, http.StatusTooManyRequests)
	if got := strings.TrimSpace(string(body)); got != overLimitBody {
		t.Errorf("body %s, want %s", got, overLimitBody)
	}
	if values := resp.Header.Values("Retry-After"); len(values) > 1 || !ok(resp.Header.Get("Retry-After")) {
		t.Errorf("Retry-After %q", values)
	}
}

// TestInFlightLimitRefuses checks the answer over the limit in every
// Retry-After form (and the mixed rotation), that it starts no cooldown,
// and that asynchronous work counts until it is ready.
func TestInFlightLimitRefuses(t *testing.T) {
	t.Parallel()
	// The deadline the header states: epoch+3s, rounded up to a second.
	at := simserver.CeilSecond(epoch.Add(3 * time.Second))
	date := func(prefix func(string) bool) func(string) bool {
		return func(v string) bool {
			d, err := http.ParseTime(v)
			return err == nil && d.Equal(at) && prefix(v)
		}
	}
	forms := []struct {
		form RetryAfterForm
		ok   func(string) bool
	}{
		{FormSeconds, func(v string) bool { return v == "3" }},
		{FormIMFFixdate, date(func(v string) bool { return v == at.Format(http.TimeFormat) })},
		{FormRFC850, date(func(v string) bool { return strings.HasPrefix(v, "Sunday, ") })},
		{FormASCTime, date(func(v string) bool { return v[3] == ' ' && !strings.Contains(v, "GMT") })},
		{FormNone, func(v string) bool { return v == "" }},
		{FormMalformed, func(v string) bool { return v == malformedValues[0] }},
	}
	for _, f := range forms {
		t.Run(string(f.form), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{MaxInFlight: 1, InFlightRetryAfter: 3 * time.Second, RetryAfterForm: f.form,
				AsyncShare: 1, ProcessingTime: 10 * time.Second})
			resp, data := b.submit("first", remoteBody(1))
			wantStatus(t, resp, data, http.StatusAccepted)
			resp, data = b.submit("second", remoteBody(2))
			wantOverLimit(t, resp, data, f.ok)

			// No cooldown: the next submission is accepted as soon as
			// the first is ready, well before 3 seconds are up.
			b.clock.Advance(10 * time.Second)
			resp, data = b.submit("second", remoteBody(2))
			wantStatus(t, resp, data, http.StatusAccepted)

			st := b.sim.Stats()
			if st.OverLimit != 1 || st.RateLimited != 1 || len(st.Cooldowns) != 0 || st.Accepted != 2 ||
				st.MaxInFlightSeen[defaultScope] != 1 || st.InFlight[defaultScope] != 1 {
				t.Errorf("stats %+v", st)
			}
			if a := st.Arrivals[1]; !a.OverLimit || a.Status != http.StatusTooManyRequests || a.Violation || a.InFlight ||
				!a.ArrivedAt.Equal(epoch) || a.IdempotencyKey != "second" {
				t.Errorf("over-limit arrival %+v", a)
			}
			if st.Arrivals[0].OverLimit || st.Arrivals[2].OverLimit {
				t.Errorf("accepted arrivals marked over the limit: %+v", st.Arrivals)
			}
		})
	}

	t.Run("mixed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{MaxInFlight: 1, InFlightRetryAfter: 3 * time.Second, RetryAfterForm: FormMixed,
			AsyncShare: 1, ProcessingTime: time.Minute})
		resp, data := b.submit("first", remoteBody(1))
		wantStatus(t, resp, data, http.StatusAccepted)
		for i, f := range forms {
			resp, data = b.submit("over-"+strconv.Itoa(i), remoteBody(2))
			wantOverLimit(t, resp, data, f.ok)
		}
		if st := b.sim.Stats(); st.OverLimit != len(forms) || len(st.Cooldowns) != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestInFlightAsyncWork checks what counts: each asynchronous
// transcription until it is ready, a batch as one until its last new item
// is, in its own scope only; polls and reconciles are never refused.
func TestInFlightAsyncWork(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{APIKeys: []string{APIKeyDefault, "key-b"}, MaxInFlight: 2, AsyncShare: 1, ProcessingTime: 10 * time.Second})
	over := func(key string, d byte) {
		t.Helper()
		resp, data := b.submit(key, remoteBody(d))
		wantOverLimit(t, resp, data, func(v string) bool { return v == "1" }) // InFlightRetryAfterDefault
	}
	inFlight := func(want int) {
		t.Helper()
		if got := b.sim.Stats().InFlight[defaultScope]; got != want {
			t.Errorf("at %v: %d in flight, want %d", b.clock.Now().Sub(epoch), got, want)
		}
	}

	resp, data := b.submit("a", remoteBody(1)) // ready at 10s
	wantStatus(t, resp, data, http.StatusAccepted)
	idA := decode[wireTranscription](t, data).ID
	b.clock.Advance(4 * time.Second)
	resp, data = b.submit("b", remoteBody(2)) // ready at 14s
	wantStatus(t, resp, data, http.StatusAccepted)
	inFlight(2)
	over("c", 3)
	over("a", 1) // a replay is a submission like any other

	// Reads are never refused, and do not count.
	for range 3 {
		resp, data = b.do(http.MethodGet, "/v1/transcriptions/"+idA, nil)
		wantStatus(t, resp, data, http.StatusOK)
		resp, data = b.do(http.MethodGet, "/v1/transcriptions?idempotency_key=b", nil)
		wantStatus(t, resp, data, http.StatusOK)
	}
	// Other scopes have their own count.
	resp, data = b.submit("other-model", mergeBody(remoteBody(4), "model", "phone-call"))
	wantStatus(t, resp, data, http.StatusAccepted)
	resp, data = b.submit("other-key", remoteBody(5), bearer("key-b"))
	wantStatus(t, resp, data, http.StatusAccepted)

	b.clock.Advance(6*time.Second - 1)
	over("c", 3)
	b.clock.Advance(1) // 10s: a is ready
	inFlight(1)
	resp, data = b.submit("c", remoteBody(3)) // ready at 20s
	wantStatus(t, resp, data, http.StatusAccepted)
	over("d", 6)

	b.clock.Advance(4 * time.Second) // 14s: b is ready
	batch := map[string]any{"items": []any{
		item("i1", remoteBody(7)), item("i2", remoteBody(8)), item("i3", remoteBody(9)),
	}}
	resp, data = b.postBatch("manifest", batch) // one piece of work, ready at 24s
	wantStatus(t, resp, data, http.StatusAccepted)
	batchID := decode[wireBatch](t, data).ID
	inFlight(2)
	over("d", 6)
	resp, data = b.postBatch("manifest-2", map[string]any{"items": []any{item("i4", remoteBody(10))}})
	wantOverLimit(t, resp, data, func(v string) bool { return v == "1" })
	resp, data = b.do(http.MethodGet, "/v1/batches/"+batchID, nil)
	wantStatus(t, resp, data, http.StatusOK)

	b.clock.Advance(6 * time.Second) // 20s: c is ready; the batch is not
	inFlight(1)
	b.clock.Advance(4 * time.Second) // 24s: the batch is ready
	inFlight(0)

	st := b.sim.Stats()
	if st.OverLimit != 6 || st.RateLimited != 6 || len(st.Cooldowns) != 0 || st.MaxInFlightSeen[defaultScope] != 2 ||
		st.MaxInFlightSeen[Scope{"key-b", ModelDefault}] != 1 || st.MaxInFlightSeen[Scope{APIKeyDefault, "phone-call"}] != 1 {
		t.Errorf("stats %+v", st)
	}
	if len(st.InFlight) != 0 { // the other scopes' work was ready at 14s
		t.Errorf("in flight %v", st.InFlight)
	}
}

// post sends a submission from any goroutine: it reports errors instead
// of failing the test.
func post(client *http.Client, url, key string, body map[string]any) (answer, []byte, error) {
	js, err := json.Marshal(body)
	if err != nil {
		return answer{}, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url+"/v1/transcriptions", bytes.NewReader(js))
	if err != nil {
		return answer{}, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+APIKeyDefault)
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	return answer{StatusCode: resp.StatusCode, Header: resp.Header}, data, err
}

// TestInFlightConcurrent sends many submissions at once, with latency,
// while the accepted ones are held inside the transcriber: the server
// keeps exactly MaxInFlight of them and refuses the rest, and accepts
// again once they are answered.
func TestInFlightConcurrent(t *testing.T) {
	t.Parallel()
	const limit, n = 3, 12
	var (
		held    atomic.Int32
		release = make(chan struct{})
		once    sync.Once
	)
	base := DefaultTranscriber(nil)
	b := setup(t, Config{MaxInFlight: limit, Latency: 20 * time.Millisecond, LatencyJitter: 10 * time.Millisecond,
		Transcribe: func(req SubmitRequest) (Result, error) {
			if req.Model == ModelDefault && strings.HasPrefix(req.IdempotencyKey, "rush-") {
				held.Add(1)
				<-release
			}
			return base(req)
		}})
	letGo := func() { once.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before the server closes, should the test fail early

	type result struct {
		resp answer
		data []byte
		err  error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			resp, data, err := post(b.client, b.ts.URL, "rush-"+strconv.Itoa(i), remoteBody(byte(i)))
			results <- result{resp, data, err}
		}()
	}
	eventually(t, "the limit's worth held and the rest refused", func() bool {
		return held.Load() == limit && b.sim.Stats().OverLimit == n-limit
	})
	st := b.sim.Stats()
	if st.InFlight[defaultScope] != limit || st.MaxInFlightSeen[defaultScope] != limit {
		t.Errorf("in flight %v, peak %v, want %d", st.InFlight, st.MaxInFlightSeen, limit)
	}
	// Another scope is not held up.
	resp, data := b.submit("other-model", mergeBody(remoteBody(100), "model", "phone-call"))
	wantStatus(t, resp, data, http.StatusOK)

	letGo()
	codes := map[int]int{}
	for range n {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		codes[r.resp.StatusCode]++
		if r.resp.StatusCode == http.StatusTooManyRequests {
			wantOverLimit(t, r.resp, r.data, func(v string) bool { return v == "1" })
		}
	}
	if codes[http.StatusOK] != limit || codes[http.StatusTooManyRequests] != n-limit {
		t.Errorf("answers by status %v", codes)
	}

	// No cooldown: the scope accepts again once the held ones answered.
	resp, data = b.submit("after", remoteBody(101))
	wantStatus(t, resp, data, http.StatusOK)
	st = b.sim.Stats()
	overLimit := 0
	for _, a := range st.Arrivals {
		if a.OverLimit {
			overLimit++
		}
	}
	if overLimit != n-limit || st.OverLimit != n-limit || st.RateLimited != n-limit || len(st.Cooldowns) != 0 ||
		st.Accepted != limit+2 || st.MaxInFlightSeen[defaultScope] != limit || len(st.InFlight) != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestInFlightCountsLatency checks that a submission counts from its
// arrival, through the latency wait, and that a client giving up during
// the wait frees its place.
func TestInFlightCountsLatency(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxInFlight: 1, Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js, _ := json.Marshal(remoteBody(1))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.ts.URL+"/v1/transcriptions", bytes.NewReader(js))
	req.Header.Set("Authorization", "Bearer "+APIKeyDefault)
	req.Header.Set("Idempotency-Key", "waiting")
	sent := make(chan error, 1)
	go func() {
		resp, err := b.client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		sent <- err
	}()
	eventually(t, "the submission to count while it waits", func() bool { return b.sim.Stats().InFlight[defaultScope] == 1 })
	if st := b.sim.Stats(); st.Submissions != 0 || st.MaxInFlightSeen[defaultScope] != 1 {
		t.Errorf("stats while waiting %+v", st)
	}
	cancel()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v, want its cancellation", err)
	}
	eventually(t, "the place to be freed", func() bool {
		st := b.sim.Stats()
		return st.Cancelled == 1 && len(st.InFlight) == 0
	})
}

// TestOverLimitAfterCooldowns drives a scope through two cooldowns with
// over-limit submissions around the first one's deadline, and checks what
// the helper counts.
func TestOverLimitAfterCooldowns(t *testing.T) {
	t.Parallel()
	src := newScriptedSource()
	b := setup(t, Config{APIKeys: []string{APIKeyDefault, "key-b"}, MaxInFlight: 1, RateLimitShare: 0.5, AsyncShare: 0.5,
		Cooldown: 2 * time.Second, ProcessingTime: 10 * time.Second, Rand: rand.New(src)})
	kb := bearer("key-b")
	at := func(d time.Duration) { b.clock.Set(epoch.Add(d)) }
	submit := func(key string, want int, headers ...header) {
		t.Helper()
		resp, data := b.submit(key, remoteBody(byte(len(key))), headers...)
		if resp.StatusCode != want {
			t.Fatalf("%s at %v: status %d, want %d; %s", key, b.clock.Now().Sub(epoch), resp.StatusCode, want, data)
		}
	}

	src.Push(yes) // 429: cooldown [0s, 2s)
	submit("starts-1", http.StatusTooManyRequests)
	at(2 * time.Second)
	src.Push(no, yes) // accepted asynchronously: in flight until 12s
	submit("async", http.StatusAccepted)
	submit("at-deadline", http.StatusTooManyRequests) // over: counted
	at(2500 * time.Millisecond)
	submit("within", http.StatusTooManyRequests) // over: counted
	src.Push(no, yes)
	submit("b-async", http.StatusAccepted, kb)
	submit("b-over", http.StatusTooManyRequests, kb) // over, but key-b had no cooldown
	at(3 * time.Second)
	submit("window-end", http.StatusTooManyRequests) // over, at deadline+window: not counted
	at(12 * time.Second)
	src.Push(yes) // 429: cooldown [12s, 14s), with nothing over the limit after it
	submit("starts-2", http.StatusTooManyRequests)
	at(14 * time.Second)
	submit("after-2", http.StatusOK)

	st := b.sim.Stats()
	if st.OverLimit != 4 || len(st.Cooldowns) != 2 || st.RateLimited != 6 {
		t.Fatalf("stats %+v", st)
	}
	per, total := st.OverLimitAfterCooldowns(time.Second)
	if total != 2 || per != 1 {
		t.Errorf("within 1s: %v per cooldown, %d in all; want 1 and 2", per, total)
	}
	per, total = st.OverLimitAfterCooldowns(1001 * time.Millisecond) // takes window-end in
	if total != 3 || per != 1.5 {
		t.Errorf("within 1.001s: %v per cooldown, %d in all; want 1.5 and 3", per, total)
	}
	if per, total := st.OverLimitAfterCooldowns(0); total != 0 || per != 0 {
		t.Errorf("empty window: %v, %d", per, total)
	}
}

// TestOverLimitAfterCooldownsCounting checks the helper's arithmetic on
// made-up Stats: per cooldown of the arrival's scope, windows that overlap
// count an arrival once each, and no cooldowns make zero.
func TestOverLimitAfterCooldownsCounting(t *testing.T) {
	t.Parallel()
	a, other := Scope{"k", "m"}, Scope{"k", "other"}
	t0 := epoch
	over := func(s Scope, d time.Duration) Arrival {
		return Arrival{Scope: s, ArrivedAt: t0.Add(d), OverLimit: true, Status: http.StatusTooManyRequests}
	}
	st := Stats{
		Cooldowns: []Cooldown{
			{Scope: a, Deadline: t0.Add(10 * time.Second)},
			{Scope: a, Deadline: t0.Add(10500 * time.Millisecond)},
			{Scope: other, Deadline: t0.Add(30 * time.Second)},
		},
		Arrivals: []Arrival{
			over(a, 9*time.Second),          // before both windows
			over(a, 10*time.Second),         // the first window
			over(a, 10600*time.Millisecond), // both windows
			{Scope: a, ArrivedAt: t0.Add(10700 * time.Millisecond), Status: http.StatusTooManyRequests}, // a cooldown 429
			over(other, 10600*time.Millisecond), // another scope, outside its window
		},
	}
	if per, total := st.OverLimitAfterCooldowns(time.Second); total != 3 || per != 1 {
		t.Errorf("%v per cooldown, %d in all; want 1 and 3", per, total)
	}
	if per, total := (Stats{Arrivals: st.Arrivals}).OverLimitAfterCooldowns(time.Hour); total != 0 || per != 0 {
		t.Errorf("without cooldowns: %v, %d", per, total)
	}
}

// TestStatsCopiesInFlightMaps checks that a snapshot's maps are its own.
func TestStatsCopiesInFlightMaps(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AsyncShare: 1, ProcessingTime: time.Minute})
	resp, data := b.submit("k", remoteBody(1))
	wantStatus(t, resp, data, http.StatusAccepted)
	st := b.sim.Stats()
	st.MaxInFlightSeen[defaultScope] = 99
	st.InFlight[defaultScope] = 99
	if again := b.sim.Stats(); again.MaxInFlightSeen[defaultScope] != 1 || again.InFlight[defaultScope] != 1 {
		t.Errorf("a snapshot's maps are shared: %+v", again)
	}
}

func TestReopenLag(t *testing.T) {
	t.Parallel()
	a, b := Scope{APIKey: "a", Model: "m"}, Scope{APIKey: "b", Model: "m"}
	st := Stats{
		Cooldowns: []Cooldown{
			{Scope: a, Deadline: epoch.Add(time.Second)},
			{Scope: a, Deadline: epoch.Add(5 * time.Second)},
			{Scope: b, Deadline: epoch.Add(time.Second)}, // never followed: not counted
		},
		Arrivals: []Arrival{
			{Scope: a, ArrivedAt: epoch.Add(500 * time.Millisecond)}, // inside the first
			{Scope: a, ArrivedAt: epoch.Add(1300 * time.Millisecond)},
			{Scope: a, ArrivedAt: epoch.Add(1200 * time.Millisecond)},
			{Scope: a, ArrivedAt: epoch.Add(5100 * time.Millisecond)},
		},
	}
	if mean, n := st.ReopenLag(); n != 2 || mean != 150*time.Millisecond {
		t.Errorf("ReopenLag = %v over %d, want 150ms over 2", mean, n)
	}
	if mean, n := (Stats{}).ReopenLag(); n != 0 || mean != 0 {
		t.Errorf("no cooldowns: %v over %d", mean, n)
	}
}

// TestDecideOnReceipt: a refusal is decided before Latency and answered at
// once (with an hour of Latency, the test would otherwise hang); accepted
// work still waits Latency, and a client that gives up meanwhile leaves
// its arrival with Status 0.
func TestDecideOnReceipt(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{DecideOnReceipt: true, Latency: time.Hour, RateLimitShare: 1, Cooldown: time.Minute})
	for _, key := range []string{"starts-the-cooldown", "inside-it"} {
		resp, data := b.submit(key, remoteBody(1))
		wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
	}
	st := b.sim.Stats()
	if len(st.Cooldowns) != 1 || len(st.Arrivals) != 2 || st.Arrivals[1].Status != http.StatusTooManyRequests {
		t.Fatalf("cooldowns %d, arrivals %+v", len(st.Cooldowns), st.Arrivals)
	}

	a := setup(t, Config{DecideOnReceipt: true, Latency: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	body, _ := json.Marshal(remoteBody(2))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.ts.URL+"/v1/transcriptions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+APIKeyDefault)
	req.Header.Set("Idempotency-Key", "accepted-then-abandoned")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := a.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %d before Latency", resp.StatusCode)
	}
	if !testwaitFor(func() bool { s := a.sim.Stats(); return s.Cancelled == 1 }) {
		t.Fatal("the abandoned submission was never counted as cancelled")
	}
	if st := a.sim.Stats(); len(st.Arrivals) != 1 || st.Arrivals[0].Status != 0 || st.Accepted != 0 {
		t.Fatalf("arrivals %+v, accepted %d", st.Arrivals, st.Accepted)
	}
}

// testwaitFor polls cond for up to 5 s.
func testwaitFor(cond func() bool) bool {
	for range 500 {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}
