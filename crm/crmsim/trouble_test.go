package crmsim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/crm/connector"
)

// freshClient opens a new connection for every request, so that a dropped
// connection surfaces as an error instead of a transparent resend.
func freshClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// TestDropAfterApplyThenRetry: the CRM applies the set, calls OnApply,
// then resets the connection; the sender sees a network failure, and its
// retry is a replay with the original id.
func TestDropAfterApplyThenRetry(t *testing.T) {
	t.Parallel()
	var applied []string
	var b *bundle
	b = setup(t, Config{DropAfterApplyShare: 1, OnApply: func(key string) {
		// Recorded before OnApply: a concurrent delivery would be a replay.
		if _, _, ok := b.sim.Applied(key); !ok {
			t.Errorf("OnApply(%q) before the set is recorded", key)
		}
		applied = append(applied, key)
	}})
	client := freshClient()
	t.Cleanup(client.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodPost, b.ts.URL+"/v1/action-sets", strings.NewReader(string(goldenBody(t))))
	req.Header.Set("Authorization", "Bearer "+TokenDefault)
	req.Header.Set("Idempotency-Key", "t1:call-42:1")
	req.Header.Set("X-Delivery-Attempt", "1")
	if resp, err := client.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("first delivery answered %d, want a dropped connection", resp.StatusCode)
	}
	a := b.postWith(client, goldenBody(t), header{"X-Delivery-Attempt", "2"})
	var ok successBody
	a.decode(t, &ok)
	if a.Status != http.StatusOK || ok.ID != "crm_1" {
		t.Errorf("retry: %d %s, want 200 crm_1", a.Status, a.Body)
	}
	st := b.sim.Stats()
	if st.Drops != 1 || st.Applied != 1 || st.Replays != 1 || st.ApplyCount["t1:call-42:1"] != 1 {
		t.Errorf("stats %+v", st)
	}
	if len(st.Arrivals) != 2 || !st.Arrivals[0].Dropped || st.Arrivals[0].Status != 0 || st.Arrivals[1].Attempt != 2 {
		t.Errorf("arrivals %+v", st.Arrivals)
	}
	if len(applied) != 1 || applied[0] != "t1:call-42:1" {
		t.Errorf("OnApply calls %v", applied)
	}
}

// TestWebhookTargetAgainstSim: callscribe's webhook target and the CRM
// double agree on the protocol, through a drop after apply.
func TestWebhookTargetAgainstSim(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{DropAfterApplyShare: 1})
	client := freshClient()
	t.Cleanup(client.CloseIdleConnections)
	tg, err := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: b.ts.URL, Token: TokenDefault, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	set := testSet()
	r, err := tg.Deliver(t.Context(), connector.Delivery{Set: set, Attempt: 1})
	if err != nil || r.Outcome != connector.OutcomeTransient || r.Class != connector.ClassNetwork {
		t.Fatalf("first delivery: %+v, %v; want transient network", r, err)
	}
	r, err = tg.Deliver(t.Context(), connector.Delivery{Set: set, Attempt: 2})
	if err != nil || r.Outcome != connector.OutcomeReplayed || r.CRMID != "crm_1" {
		t.Fatalf("retry: %+v, %v; want replayed crm_1", r, err)
	}
	// Another version of the set is another key; the same key with other
	// content is dead.
	set2 := testSet()
	set2.ActionVersion = 2
	if r, _ = tg.Deliver(t.Context(), connector.Delivery{Set: set2, Attempt: 1}); r.Outcome != connector.OutcomeTransient {
		t.Errorf("version 2 (dropped): %+v", r)
	}
	changed := testSet()
	changed.Actions[3].Date = "2026-12-05"
	if r, _ = tg.Deliver(t.Context(), connector.Delivery{Set: changed, Attempt: 1}); r.Outcome != connector.OutcomeDead || r.Class != connector.ClassIdempotencyKeyReused {
		t.Errorf("changed content: %+v, want dead idempotency_key_reused", r)
	}
	body, _ := connector.WebhookBody(set)
	if st := b.sim.Stats(); string(st.Bodies["t1:call-42:1"]) != string(body) || st.Applied != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestConcurrentDeliveriesApplyOnce: many senders deliver the same keys at
// once, through throttling, server errors and drops, each retrying until
// the CRM says applied or replayed. Every key is applied exactly once and
// every sender ends with the same CRM id for it.
func TestConcurrentDeliveriesApplyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{
		// A step on every reading: cooldowns end under concurrent
		// traffic without real waiting.
		Clock:               clock.NewStepping(epoch, time.Millisecond),
		RateLimitShare:      0.1,
		Cooldown:            5 * time.Millisecond, // five reads of the ticking clock
		ServerErrorShare:    0.2,
		DropAfterApplyShare: 0.3,
	})
	const keys, senders = 6, 8
	var applyCalls atomic.Int64
	var ids sync.Map // key → crm id
	var wg sync.WaitGroup
	for k := range keys {
		set := testSet()
		set.CallID = fmt.Sprintf("call-%d", k)
		for range senders {
			wg.Go(func() {
				client := freshClient()
				defer client.CloseIdleConnections()
				tg, err := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: b.ts.URL, Token: TokenDefault, HTTPClient: client})
				if err != nil {
					t.Error(err)
					return
				}
				for attempt := 1; attempt <= 200; attempt++ {
					r, err := tg.Deliver(t.Context(), connector.Delivery{Set: set, Attempt: attempt})
					if err != nil {
						t.Error(err)
						return
					}
					switch r.Outcome {
					case connector.OutcomeApplied, connector.OutcomeReplayed:
						if r.Outcome == connector.OutcomeApplied {
							applyCalls.Add(1)
						}
						if prev, loaded := ids.LoadOrStore(set.IdempotencyKey(), r.CRMID); loaded && prev != r.CRMID {
							t.Errorf("%s: CRM ids %v and %v", set.IdempotencyKey(), prev, r.CRMID)
						}
						return
					case connector.OutcomeDead:
						t.Errorf("%s: dead %+v", set.IdempotencyKey(), r)
						return
					}
				}
				t.Errorf("%s: not delivered in 200 attempts", set.IdempotencyKey())
			})
		}
	}
	wg.Wait()
	st := b.sim.Stats()
	if st.Applied != keys || len(b.sim.ActionSets()) != keys || len(st.ApplyCount) != keys {
		t.Errorf("applied %d, held %d, want %d", st.Applied, len(b.sim.ActionSets()), keys)
	}
	for k, n := range st.ApplyCount {
		if n != 1 {
			t.Errorf("%s applied %d times", k, n)
		}
	}
	// A sender sees "applied" only when its own request created the set and
	// the answer arrived; a drop hides it, and its retry sees "replayed".
	if got := applyCalls.Load(); got != int64(keys-st.Drops) {
		t.Errorf("%d senders saw applied, want %d (keys %d, drops %d)", got, keys-st.Drops, keys, st.Drops)
	}
	if st.Deliveries != len(st.Arrivals) || st.Deliveries < keys*senders {
		t.Errorf("deliveries %d, arrivals %d", st.Deliveries, len(st.Arrivals))
	}
}

// TestConcurrentRawDeliveries: without a client library in between, many
// goroutines posting the same few keys apply each once; all others are
// replays.
func TestConcurrentRawDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const keys, senders = 4, 25
	var wg sync.WaitGroup
	var created atomic.Int64
	for k := range keys {
		set := testSet()
		set.ActionVersion = k + 1
		body := mustJSON(t, set)
		for range senders {
			wg.Go(func() {
				a := b.postWith(b.client, body, header{"Idempotency-Key", set.IdempotencyKey()})
				switch a.Status {
				case http.StatusCreated:
					created.Add(1)
				case http.StatusOK:
				default:
					t.Errorf("%d %s", a.Status, a.Body)
				}
			})
		}
	}
	wg.Wait()
	st := b.sim.Stats()
	if created.Load() != keys || st.Applied != keys || st.Replays != keys*(senders-1) {
		t.Errorf("created %d, stats %+v", created.Load(), st)
	}
}

// TestLatencyCancelled: a sender that gives up during Latency is counted
// as cancelled and nothing is applied.
func TestLatencyCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Latency: time.Hour})
	// Long enough for the request to reach the handler on a loaded
	// machine (cancelled before it does, it is not the case tested),
	// short beside the hour.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.ts.URL+"/v1/action-sets", strings.NewReader(string(goldenBody(t))))
	if resp, err := b.client.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("answered %d during an hour of latency", resp.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.sim.Stats().Cancelled != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want Cancelled 1", b.sim.Stats())
		}
		runtime.Gosched()
	}
	if st := b.sim.Stats(); st.Deliveries != 0 || st.Applied != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestServe serves on a socket until the context ends.
func TestServe(t *testing.T) {
	t.Parallel()
	sim, err := New(Config{Tokens: []string{"tok"}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sim.Serve(ctx, ln) }()
	tg, err := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: "http://" + ln.Addr().String(), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := tg.Deliver(t.Context(), connector.Delivery{Set: testSet(), Attempt: 1})
	if err != nil || r.Outcome != connector.OutcomeApplied {
		t.Errorf("deliver: %+v %v", r, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}
