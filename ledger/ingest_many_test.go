package ledger_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/ledger"
)

// IngestManyTx builds each new recording from the values it inserted
// instead of reading the rows back: every result, created or converged
// on (a repeat within the slice), equals the row the ledger reads back
// afterwards, whatever the optional fields (a deadline, a start and a
// duration each zero or not, with nanoseconds the database drops; model,
// language, lane, a route).
func TestIngestManyTxReturnsTheStoredRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	base := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	rapid.Check(t, func(rt *rapid.T) {
		when := func(label string) time.Time {
			if rapid.Bool().Draw(rt, label+"_zero") {
				return time.Time{}
			}
			return base.Add(time.Duration(rapid.Int64Range(-1e15, 1e15).Draw(rt, label)))
		}
		var ns []ledger.NewRecording
		for i := range rapid.IntRange(1, 6).Draw(rt, "n") {
			if i > 0 && rapid.IntRange(0, 4).Draw(rt, "repeat") == 0 {
				ns = append(ns, ns[rapid.IntRange(0, i-1).Draw(rt, "of")])
				continue
			}
			n := newRecording()
			n.Lane = rapid.SampledFrom([]ledger.Lane{ledger.LaneBatch, ledger.LaneImmediate}).Draw(rt, "lane")
			n.Deadline, n.StartedAt = when("deadline"), when("started")
			n.AudioDuration = time.Duration(rapid.Int64Range(0, 3_600_000_000).Draw(rt, "duration_us")) * time.Microsecond
			n.AudioBytes = rapid.Int64Range(0, 1<<30).Draw(rt, "bytes")
			n.Model = rapid.SampledFrom([]string{"", "general"}).Draw(rt, "model")
			n.Language = rapid.SampledFrom([]string{"", "en"}).Draw(rt, "language")
			if rapid.Bool().Draw(rt, "route") {
				n.Route = &ledger.IngestRoute{Lane: n.Lane, OneByOne: rapid.Bool().Draw(rt, "one_by_one")}
			}
			ns = append(ns, n)
		}
		var res []ledger.IngestManyResult
		if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var err error
			res, err = b.ledger.IngestManyTx(ctx, tx, ns, ledger.IngestManyOptions{})
			return err
		}); err != nil {
			rt.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				rt.Fatalf("item %d: %v", i, r.Err)
			}
			stored, err := b.ledger.Recording(ctx, r.Recording.ID)
			if err != nil {
				rt.Fatal(err)
			}
			if !reflect.DeepEqual(r.Recording, stored) {
				rt.Fatalf("item %d returned\n%s\nthe ledger reads back\n%s", i, fmt.Sprintf("%+v", r.Recording), fmt.Sprintf("%+v", stored))
			}
		}
	})
}
