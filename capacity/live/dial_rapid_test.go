package live_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/internal/rediskit"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// TestDialerProperty runs random enqueue/re-check/answer/end sequences
// through two Dialers (two processes) on one Redis against a model: the
// queue stays in enqueue order, a re-check reserves exactly the oldest
// calls that fit, every reservation holds one transcriber lease (never
// more than the limit), and ends give every lease back.
func TestDialerProperty(t *testing.T) {
	t.Parallel()
	rdb, _ := testredis.New(t, "live")
	ctx := context.Background()
	const limit = 2
	p := live.CallProviders{STT: []string{"stt"}}
	rapid.Check(t, func(rt *rapid.T) {
		prefix := testredis.UniquePrefix("live", t.Name())
		defer testredis.DeleteKeys(rdb, prefix)
		var dialers [2]*live.Dialer
		for i := range dialers {
			l, err := capacity.New(captest.OnRedis(rt, rdb, prefix), capacity.Config{Limits: map[string]capacity.ProviderLimit{"stt/stt": {Limit: limit}}})
			if err != nil {
				rt.Fatal(err)
			}
			if dialers[i], err = live.NewDialer(captest.OnRedis(rt, rdb, prefix), l, live.DialerConfig{}); err != nil {
				rt.Fatal(err)
			}
		}
		var queue []string          // model: queued, oldest first
		held := map[string]string{} // model: call → "reserved" or "answered"
		next := 0
		pick := func(rt *rapid.T, label string) string {
			ids := slices.Concat(queue, slices.Sorted(func(yield func(string) bool) {
				for id := range held {
					if !yield(id) {
						return
					}
				}
			}), []string{"never"})
			return rapid.SampledFrom(ids).Draw(rt, label)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"enqueue": func(rt *rapid.T) {
				id := fmt.Sprintf("c%d", next)
				next++
				dialers[rapid.IntRange(0, 1).Draw(rt, "d")].Enqueue(ctx, live.Call{ID: id, Providers: p})
				queue = append(queue, id)
			},
			"recheck": func(rt *rapid.T) {
				var got []string
				dialers[rapid.IntRange(0, 1).Draw(rt, "d")].Recheck(ctx, func(c live.Call, r live.Reservation) {
					if r.Transcriber.Lease.Holder != c.ID || !r.Transcriber.Lease.Counted() {
						rt.Fatalf("reservation of %s: %+v", c.ID, r)
					}
					got = append(got, c.ID)
				})
				n := min(limit-len(held), len(queue))
				if want := queue[:n]; !slices.Equal(got, want) {
					rt.Fatalf("re-check dialled %v, want the oldest that fit %v (queue %v, held %v)", got, want, queue, held)
				}
				for _, id := range got {
					held[id] = live.DialReserved
				}
				queue = slices.Clone(queue[n:])
			},
			"answer": func(rt *rapid.T) {
				id := pick(rt, "call")
				slot, ok := dialers[rapid.IntRange(0, 1).Draw(rt, "d")].Answered(ctx, id)
				_, want := held[id]
				if ok != want || (ok && slot.Lease.Holder != id) {
					rt.Fatalf("Answered(%s) = %+v %v, want %v", id, slot, ok, want)
				}
				if ok {
					held[id] = live.DialAnswered
				}
			},
			"end": func(rt *rapid.T) {
				id := pick(rt, "call")
				dialers[rapid.IntRange(0, 1).Draw(rt, "d")].CallEnded(ctx, id)
				delete(held, id)
				queue = slices.DeleteFunc(queue, func(q string) bool { return q == id })
			},
			"": func(rt *rapid.T) {
				queued, err := dialers[0].Queued(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				var ids []string
				for i, q := range queued {
					if q.Position != i+1 {
						rt.Fatalf("queue %+v: positions not 1..n", queued)
					}
					ids = append(ids, q.Call.ID)
				}
				if !slices.Equal(ids, queue) {
					rt.Fatalf("queue %v, model %v", ids, queue)
				}
				n, err := rdb.ZCard(ctx, rediskit.Key(prefix, "stt/stt", "leases")).Result()
				if err != nil {
					rt.Fatal(err)
				}
				if int(n) != len(held) || n > limit {
					rt.Fatalf("%d transcriber leases, want %d (held %v), limit %d", n, len(held), held, limit)
				}
				for id, st := range held {
					got, err := dialers[1].State(ctx, id)
					if err != nil || got.State != st {
						rt.Fatalf("State(%s) = %+v %v, want %s", id, got, err, st)
					}
				}
			},
		})
	})
}
