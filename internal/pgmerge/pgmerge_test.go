package pgmerge_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/internal/pgmerge"
	"github.com/callscribe/callscribe/internal/testdb"
)

// Each item's caller hears once: its row's value, or pgx.ErrNoRows when
// no row named it; when the statement fails partway, or a row names a
// place out of range or twice, every caller hears the error, whatever
// rows came before it. The rows come from PostgreSQL, in any order.
func TestAnswerGivesEachItemItsOwn(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(rt, "items")
		ords := rapid.SliceOfN(rapid.IntRange(-1, n+1), 0, n+2).Draw(rt, "ords")
		fail := rapid.Bool().Draw(rt, "fail") && len(ords) > 0
		vals, div := make([]int64, len(ords)), make([]int64, len(ords))
		for i, o := range ords {
			vals[i], div[i] = int64(100*o+i), 1
		}
		if fail {
			div[len(div)-1] = 0 // the last row divides by zero: the statement fails after the others were sent
		}
		calls := make([]int, n)
		got := make([]int64, n)
		errs := make([]error, n)
		fns := make([]func(int64, error), n)
		for i := range fns {
			fns[i] = func(v int64, err error) { calls[i]++; got[i], errs[i] = v, err }
		}
		b := &pgx.Batch{}
		b.Queue(`SELECT o, v / d FROM unnest($1::int4[], $2::int8[], $3::int8[]) AS t(o, v, d)`, toInt32(ords), vals, div).
			Query(func(rows pgx.Rows) error {
				return pgmerge.Answer(rows, fns, func(rows pgx.Rows) (int32, int64, error) {
					var o int32
					var v int64
					err := rows.Scan(&o, &v)
					return o, v, err
				})
			})
		batchErr := pool.SendBatch(ctx, b).Close()

		valid := !fail
		seen := map[int]int{} // place -> value
		for i, o := range ords {
			if _, dup := seen[o]; dup || o < 1 || o > n {
				valid = false
			}
			seen[o] = int(vals[i])
		}
		for i := range n {
			if calls[i] != 1 {
				rt.Fatalf("item %d heard %d times", i+1, calls[i])
			}
			switch v, ok := seen[i+1]; {
			case !valid:
				if errs[i] == nil || errors.Is(errs[i], pgx.ErrNoRows) {
					rt.Fatalf("item %d: err %v, want the statement's error", i+1, errs[i])
				}
			case ok:
				if errs[i] != nil || got[i] != int64(v) {
					rt.Fatalf("item %d: %d %v, want %d", i+1, got[i], errs[i], v)
				}
			case !errors.Is(errs[i], pgx.ErrNoRows):
				rt.Fatalf("item %d: err %v, want pgx.ErrNoRows", i+1, errs[i])
			}
		}
		if (batchErr == nil) != valid {
			rt.Fatalf("the batch's error %v, valid answers %v", batchErr, valid)
		}
	})
}

func toInt32(xs []int) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}
