package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/internal/pgmerge"
	"github.com/callscribe/callscribe/ledger"
)

// groupLedger is a ledger whose committer gathers groups of up to max
// steps with one flusher, lingering long enough that steps started
// together share a group whatever the machine's load; a probe table
// records what steps wrote.
func groupLedger(t *testing.T, maxItems int, linger time.Duration) (*ledger.Ledger, *bundle) {
	t.Helper()
	b := setup(t)
	l, err := ledger.New(b.pool, &ledger.Config{Clock: b.clock, Commit: ledger.CommitConfig{MaxItems: maxItems, Flushers: 1, Linger: linger}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(context.Background(), `CREATE TABLE commit_probe (k text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return l, b
}

func probeKeys(t *testing.T, b *bundle) map[string]bool {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT k FROM commit_probe`)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, k := range keys {
		out[k] = true
	}
	return out
}

func insertProbe(k string) ledger.CommitFunc {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO commit_probe (k) VALUES ($1)`, k)
		return err
	}
}

// Steps started together share one group, and each is durable when its
// Commit returns.
func TestGroupCommitSharesOneTransaction(t *testing.T) {
	t.Parallel()
	const n = 16
	l, b := groupLedger(t, n, time.Second)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = l.Commit(context.Background(), insertProbe(fmt.Sprint(i))) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if got := len(probeKeys(t, b)); got != n {
		t.Fatalf("%d of %d steps written", got, n)
	}
	// The n-th step fills the group, which is written at once: one group.
	st := l.CommitStats()
	if st.Groups != 1 || st.Items != n || st.Alone != 0 {
		t.Fatalf("stats %+v, want one group of %d and none alone", st, n)
	}
}

// A step that fails rolls its group back; every other step is written
// again alone and committed, and the failed one's writes are gone.
func TestGroupCommitFailedStepIsItsOwn(t *testing.T) {
	t.Parallel()
	const n = 6
	l, b := groupLedger(t, n, time.Second)
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		fn := insertProbe(fmt.Sprint(i))
		if i == 3 {
			fn = func(ctx context.Context, tx pgx.Tx) error {
				if err := insertProbe("3")(ctx, tx); err != nil {
					return err
				}
				return boom // after writing: the group must not keep it
			}
		}
		wg.Go(func() { errs[i] = l.Commit(context.Background(), fn) })
	}
	wg.Wait()
	keys := probeKeys(t, b)
	for i := range n {
		if i == 3 {
			if !errors.Is(errs[i], boom) || keys["3"] {
				t.Fatalf("failed step: err %v, written %v", errs[i], keys["3"])
			}
			continue
		}
		if errs[i] != nil || !keys[fmt.Sprint(i)] {
			t.Fatalf("step %d: err %v, written %v", i, errs[i], keys[fmt.Sprint(i)])
		}
	}
	if st := l.CommitStats(); st.Alone != n {
		t.Fatalf("stats %+v: want the group's %d steps written again alone", st, n)
	}
}

// A statement the database refuses (here a duplicate key) fails the
// transaction: the group is written again alone too.
func TestGroupCommitRefusedStatementIsItsOwn(t *testing.T) {
	t.Parallel()
	l, b := groupLedger(t, 3, time.Second)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, k := range []string{"a", "a", "b"} {
		wg.Go(func() { errs[i] = l.Commit(context.Background(), insertProbe(k)) })
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if keys := probeKeys(t, b); failed != 1 || !keys["a"] || !keys["b"] {
		t.Fatalf("errors %v, keys %v: want a and b written, one duplicate refused", errs, keys)
	}
}

// A lost compare-and-set writes nothing and keeps the group: the others
// commit in it, and the loser gets its conflict.
func TestGroupCommitConflictKeepsGroup(t *testing.T) {
	t.Parallel()
	l, b := groupLedger(t, 4, time.Second)
	recs := make([]ledger.Recording, 3)
	for i := range recs {
		recs[i] = b.ingest(t)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range 4 {
		r := recs[min(i, 2)] // steps 2 and 3 race for the same recording
		wg.Go(func() {
			_, errs[i] = l.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: r.State, To: ledger.StateEligible, Reason: "ready for admission"})
		})
	}
	wg.Wait()
	conflicts := 0
	for i, err := range errs {
		switch {
		case errors.Is(err, ledger.ErrStateConflict):
			conflicts++
		case err != nil:
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if conflicts != 1 {
		t.Fatalf("errors %v: want exactly one conflict", errs)
	}
	for _, r := range recs {
		got, err := l.Recording(ctx, r.ID)
		if err != nil || got.State != ledger.StateEligible {
			t.Fatalf("recording %s: %v %v", r.ID, got.State, err)
		}
	}
	if st := l.CommitStats(); st.Groups != 1 || st.Items != 4 || st.Alone != 0 {
		t.Fatalf("stats %+v: want one group of 4, none alone", st)
	}
}

// A step whose caller gives up while it waits in line is never written.
func TestGroupCommitAbandonedStepIsNotWritten(t *testing.T) {
	t.Parallel()
	l, b := groupLedger(t, 8, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := l.Commit(ctx, insertProbe("gone"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline", err)
	}
	if err := l.Commit(context.Background(), insertProbe("kept")); err != nil {
		t.Fatal(err)
	}
	if keys := probeKeys(t, b); keys["gone"] || !keys["kept"] {
		t.Fatalf("keys %v", keys)
	}
}

// Property: whatever mix of steps that commit, fail after writing, or
// lose a compare-and-set run concurrently, and however they are grouped,
// exactly the committed ones' writes are durable, each once, and each
// A Transition whose caller gives up while its group is being written
// returns at once, saying the outcome is unknown, and the step, which
// the group still writes, shares nothing with the returned value (the
// race detector would see the group's write to it): the move and a slow
// step fill a group of two (written as soon as both are queued; the
// flusher would linger 1s for the second), the slow statement holds the
// batch 3s, past the caller's 1s deadline, and the group commits both.
func TestGroupCommitCallerGoneWhileWritten(t *testing.T) {
	t.Parallel()
	l, b := groupLedger(t, 2, time.Second)
	rec := b.ingest(t)
	ctx := context.Background()
	slow := make(chan error, 1)
	go func() {
		time.Sleep(10 * time.Millisecond) // after the move, in its group
		slow <- l.Committer().CommitQueued(ctx, func(q *ledger.Queue) ledger.FinishFunc {
			b := q.Batch
			b.Queue(`SELECT pg_sleep(3)`).Exec(func(pgconn.CommandTag) error { return nil })
			return func(_ context.Context, _ pgx.Tx, batchErr error) error { return batchErr }
		}, nil)
	}()
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	got, err := l.Transition(short, ledger.Transition{RecordingID: rec.ID, From: rec.State, To: ledger.StateEligible, Reason: "test"})
	if err == nil || !strings.Contains(err.Error(), "read again") || got.ID != uuid.Nil {
		t.Fatalf("Transition cut short: %+v, %v; want the zero recording and an outcome-unknown error", got, err)
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	// The group committed both: the move is there when read again.
	moved, err := l.Recording(ctx, rec.ID)
	if err != nil || moved.State != ledger.StateEligible {
		t.Fatalf("read again: %+v, %v; want eligible", moved, err)
	}
}

// caller gets its own step's outcome.
func TestGroupCommitProperty(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `CREATE TABLE commit_probe (k text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	// The key a "mrefused" step inserts: the database refuses it.
	if _, err := b.pool.Exec(ctx, `INSERT INTO commit_probe (k) VALUES ('refused')`); err != nil {
		t.Fatal(err)
	}
	round := 0
	var mergedSteps int64
	defer func() { t.Logf("steps written by merged statements: %d", mergedSteps) }()
	rapid.Check(t, func(rt *rapid.T) {
		round++
		merged := []string{"mok", "mnothing", "mdup", "mrefused"}
		all := append([]string{"ok", "fail", "nothing", "qok", "qnothing", "qrefused", "q2", "q2fail", "q2alone", "qtailfail"}, merged...)
		cfg := ledger.CommitConfig{MaxItems: rapid.IntRange(2, 12).Draw(rt, "max"), Flushers: rapid.IntRange(1, 3).Draw(rt, "flushers"),
			Linger: time.Duration(rapid.IntRange(0, 3).Draw(rt, "linger_ms")) * time.Millisecond}
		kind := rapid.SampledFrom(all)
		if rapid.Bool().Draw(rt, "mostly_merged") {
			// Mostly merged steps (a refused one only now and then: it
			// rolls its group back), in groups that wait for them, so
			// that rounds reach ledger.MergeMin of them.
			kind = rapid.OneOf(rapid.SampledFrom(merged[:3]), rapid.SampledFrom(merged[:3]), rapid.SampledFrom(merged[:3]),
				rapid.SampledFrom(merged[:3]), rapid.SampledFrom(merged[:3]), rapid.SampledFrom(all))
			cfg.MaxItems = rapid.IntRange(ledger.MergeMin, 3*ledger.MergeMin).Draw(rt, "merged_max")
			cfg.Linger = time.Duration(rapid.IntRange(10, 30).Draw(rt, "merged_linger_ms")) * time.Millisecond
		}
		l, err := ledger.New(b.pool, &ledger.Config{Clock: b.clock, Commit: cfg})
		if err != nil {
			rt.Fatal(err)
		}
		kinds := rapid.SliceOfN(kind, 1, 30).Draw(rt, "steps")
		boom := errors.New("boom")
		errs := make([]error, len(kinds))
		var wg sync.WaitGroup
		for i, kind := range kinds {
			k := fmt.Sprintf("%d-%d", round, i)
			wg.Go(func() {
				switch kind {
				case "q2alone":
					errs[i] = l.Committer().CommitQueued(ctx, roundsProbe(kind, k, boom), insertProbe(k+"/alone"))
					return
				case "q2", "q2fail", "qtailfail":
					// Alone (its group rolled back), the same rounds and a
					// tail of its own.
					errs[i] = l.Committer().CommitQueued(ctx, roundsProbe(kind, k, boom), nil)
					return
				}
				if kind[0] == 'm' {
					errs[i] = l.Committer().CommitQueued(ctx, mergedProbe(kind, k), nil)
					return
				}
				if kind[0] == 'q' {
					errs[i] = l.Committer().CommitQueued(ctx, queuedProbe(kind, k), nil)
					return
				}
				errs[i] = l.Commit(ctx, func(ctx context.Context, tx pgx.Tx) error {
					switch kind {
					case "fail":
						if err := insertProbe(k)(ctx, tx); err != nil {
							return err
						}
						return boom
					case "nothing":
						return ledger.WroteNothing(ledger.ErrStateConflict)
					}
					return insertProbe(k)(ctx, tx)
				})
			})
		}
		wg.Wait()
		mergedSteps += l.CommitStats().Merged
		keys := probeKeys(t, b)
		for i, kind := range kinds {
			k := fmt.Sprintf("%d-%d", round, i)
			want := map[string]error{"ok": nil, "fail": boom, "nothing": ledger.ErrStateConflict, "qok": nil, "qnothing": pgx.ErrNoRows,
				"q2": nil, "q2fail": boom, "q2alone": nil, "mok": nil, "mnothing": pgx.ErrNoRows, "mdup": nil}[kind]
			var pgErr *pgconn.PgError
			switch {
			case kind == "qrefused" || kind == "qtailfail" || kind == "mrefused":
				if !errors.As(errs[i], &pgErr) || pgErr.Code != "23505" {
					rt.Fatalf("step %d (%s): err %v, want the unique violation", i, kind, errs[i])
				}
			case !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil):
				rt.Fatalf("step %d (%s): err %v", i, kind, errs[i])
			}
			if keys[k] != (kind == "ok" || kind == "qok" || kind == "q2" || kind == "mok" || kind == "mdup") {
				rt.Fatalf("step %d (%s): written %v", i, kind, keys[k])
			}
			// A step of rounds is written whole or not at all: its second
			// round and its share of the tail with its first.
			if keys[k+"/2"] != (kind == "q2") || keys["tail:"+k] != (kind == "q2") || keys[k+"/alone"] != (kind == "q2alone") {
				rt.Fatalf("step %d (%s): second round %v, tail %v, alone %v", i, kind, keys[k+"/2"], keys["tail:"+k], keys[k+"/alone"])
			}
		}
	})
}

// queuedProbe is a one-statement step as a QueueFunc: "qok" inserts k,
// "qnothing" updates no row (a compare-and-set that lost: pgx.ErrNoRows,
// nothing written), "qrefused" inserts k and then a key the database
// refuses as a duplicate (the statement's error, nothing written).
func queuedProbe(kind, k string) ledger.QueueFunc {
	return func(q *ledger.Queue) ledger.FinishFunc {
		b := q.Batch
		var qerr error
		scan := func(row pgx.Row) error {
			var got string
			if qerr = row.Scan(&got); errors.Is(qerr, pgx.ErrNoRows) {
				return nil
			}
			return qerr
		}
		switch kind {
		case "qok":
			b.Queue(`INSERT INTO commit_probe (k) VALUES ($1) RETURNING k`, k).QueryRow(scan)
		case "qnothing":
			b.Queue(`UPDATE commit_probe SET k = k WHERE k = $1 RETURNING k`, "absent:"+k).QueryRow(scan)
		case "qrefused":
			b.Queue(`INSERT INTO commit_probe (k) VALUES ($1), ('dup'), ('dup') RETURNING k`, k).QueryRow(scan)
		}
		return func(_ context.Context, tx pgx.Tx, batchErr error) error {
			if qerr == nil && batchErr != nil {
				qerr = batchErr
			}
			return ledger.KeptUsable(tx, qerr)
		}
	}
}

// mergedProbe is a one-statement step whose statement is merged with
// the round's others of its kind (ledger.QueueMerged): "mok" inserts k,
// "mnothing" matches no row (pgx.ErrNoRows, nothing written), "mdup"
// inserts k under a row id that every "mdup" shares (a second in a round
// goes as its own statement), "mrefused" inserts the key the table
// already holds (the merged statement refused, then the step alone).
func mergedProbe(kind, k string) ledger.QueueFunc {
	return func(q *ledger.Queue) ledger.FinishFunc {
		item, id := k, k
		switch kind {
		case "mnothing":
			item = "absent:" + k
		case "mdup":
			id = "dup"
		case "mrefused":
			item = "refused"
		}
		var qerr error
		ledger.QueueMerged(q, probeMergeKey{}, id, item, func(_ int32, err error) { qerr = err }, probeOne, probeMany)
		return func(_ context.Context, tx pgx.Tx, batchErr error) error {
			if qerr == nil && batchErr != nil {
				qerr = batchErr
			}
			return ledger.KeptUsable(tx, qerr)
		}
	}
}

type probeMergeKey struct{}

// probeOne writes one mergedProbe item by itself: inserts it, or, for an
// absent: one, updates the row that is not there.
func probeOne(b *pgx.Batch, item string, fn func(int32, error)) {
	sql := `INSERT INTO commit_probe (k) VALUES ($1) RETURNING 1::int4`
	if strings.HasPrefix(item, "absent:") {
		sql = `UPDATE commit_probe SET k = k WHERE k = $1 RETURNING 1::int4`
	}
	b.Queue(sql, item).QueryRow(func(row pgx.Row) error {
		var one int32
		err := row.Scan(&one)
		fn(one, err)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
}

// probeMany writes mergedProbe items in one statement: a row per item
// inserted, with its place.
func probeMany(b *pgx.Batch, items []string, fns []func(int32, error)) {
	b.Queue(`WITH u AS (SELECT x, ord FROM unnest($1::text[]) WITH ORDINALITY AS u(x, ord)),
		ins AS (INSERT INTO commit_probe (k) SELECT x FROM u WHERE x NOT LIKE 'absent:%' RETURNING k)
		SELECT u.ord::int4, 1::int4 FROM u JOIN ins ON ins.k = u.x`, items).Query(func(rows pgx.Rows) error {
		return pgmerge.Answer(rows, fns, func(rows pgx.Rows) (int32, int32, error) {
			var ord, one int32
			err := rows.Scan(&ord, &one)
			return ord, one, err
		})
	})
}

// roundsProbe is a step of two round trips and a share of the group's
// tail: its first round inserts k; its finish ("q2alone") says the case
// is its CommitFunc's (the step is written alone, by that), or queues a
// second round that inserts k/2 and fails ("q2fail") or succeeds; the
// group's tail inserts tail:k of every step in one statement, which the
// database refuses when a step ("qtailfail") gave it a duplicate key.
func roundsProbe(kind, k string, boom error) ledger.QueueFunc {
	return func(q *ledger.Queue) ledger.FinishFunc {
		var qerr error
		q.Batch.Queue(`INSERT INTO commit_probe (k) VALUES ($1)`, k).Exec(func(_ pgconn.CommandTag) error { return nil })
		tail := q.Tail(probeTailKey{}, func() ledger.Tail { return &probeTail{} }).(*probeTail)
		return func(_ context.Context, _ pgx.Tx, batchErr error) error {
			if batchErr != nil {
				return batchErr
			}
			if kind == "q2alone" {
				return errors.New("for the step's CommitFunc")
			}
			q.Then(func(q *ledger.Queue) ledger.FinishFunc {
				q.Batch.Queue(`INSERT INTO commit_probe (k) VALUES ($1)`, k+"/2").Exec(func(_ pgconn.CommandTag) error { return nil })
				return func(_ context.Context, _ pgx.Tx, batchErr error) error {
					tail.keys = append(tail.keys, "tail:"+k)
					if kind == "qtailfail" {
						tail.keys = append(tail.keys, "dup-tail", "dup-tail")
					}
					if qerr = batchErr; qerr == nil && kind == "q2fail" {
						qerr = boom
					}
					return qerr
				}
			})
			return nil
		}
	}
}

type probeTailKey struct{}

// probeTail inserts the keys its steps gave it in one statement.
type probeTail struct{ keys []string }

func (t *probeTail) Run(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `INSERT INTO commit_probe (k) SELECT unnest($1::text[])`, t.keys)
	return err
}

func TestCommitConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := ledger.New(nil, &ledger.Config{Commit: ledger.CommitConfig{MaxItems: -1, Flushers: 65, Linger: 2 * time.Second}})
	for _, field := range []string{"Commit.MaxItems", "Commit.Flushers", "Commit.Linger"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Fatalf("error %v does not name %s", err, field)
		}
	}
}

// Flushers default to half the process's CPUs, at least 2: two on a
// two-core host.
func TestCommitFlushersDefault(t *testing.T) { //nolint:paralleltest // sets GOMAXPROCS
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for procs, want := range map[int]int{1: 2, 2: 2, 3: 2, 4: 2, 6: 3, 16: 8, 512: 64} {
		runtime.GOMAXPROCS(procs)
		if got := (ledger.CommitConfig{}).WithDefaults().Flushers; got != want {
			t.Errorf("GOMAXPROCS %d: %d flushers by default, want %d", procs, got, want)
		}
		if got := (ledger.CommitConfig{Flushers: 3}).WithDefaults().Flushers; got != 3 {
			t.Errorf("GOMAXPROCS %d: a configured 3 became %d", procs, got)
		}
	}
}

// A group's moves of recordings are written by one merged statement
// (Queue.Merged): each move is its own compare-and-set, a lost one loses
// alone, and each writes what a move written by itself writes, the row
// and its event, field by field.
func TestGroupCommitMergesMoves(t *testing.T) {
	t.Parallel()
	l, b := groupLedger(t, 8, time.Second)
	ctx := context.Background()
	notBefore := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	deadline := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	// Each move twice: on a recording of the group, and on its twin,
	// moved by itself (b.ledger: a group of one writes its one-row
	// statement).
	moves := []struct {
		path []ledger.State // walked first, alone
		t    ledger.Transition
	}{
		{nil, ledger.Transition{To: ledger.StateEligible, Reason: "ready"}},
		{nil, ledger.Transition{To: ledger.StateEligible, Reason: "ready", Detail: map[string]any{"k": "v"}}},
		{[]ledger.State{ledger.StateEligible}, ledger.Transition{To: ledger.StateSubmitted, Reason: "sent", Provider: new("generic-http"), ProviderID: new("vid-1")}},
		{[]ledger.State{ledger.StateEligible, ledger.StateSubmitted}, ledger.Transition{To: ledger.StateRetryWait, Reason: "throttled",
			ResponseClass: "rate_limited", RetryAfter: new("30"), NotBefore: &notBefore, Deadline: &deadline}},
		{[]ledger.State{ledger.StateEligible, ledger.StateSubmitted}, ledger.Transition{To: ledger.StateTranscribed, Reason: "done", ResponseClass: "completed"}},
		{[]ledger.State{ledger.StateEligible}, ledger.Transition{To: ledger.StateFailed, Reason: "refused", Detail: map[string]any{"n": 3.0}}},
		{nil, ledger.Transition{To: ledger.StateExpired, Reason: "deadline passed"}},
	}
	paths := make([][]ledger.State, len(moves))
	for i, m := range moves {
		paths[i] = m.path
	}
	grouped, twins := b.walkEach(t, paths), b.walkEach(t, paths)
	lost := b.walk(t, b.ingest(t), ledger.StateEligible) // moved meanwhile: its step reads received
	var wg sync.WaitGroup
	got := make([]ledger.Recording, len(moves))
	errs := make([]error, len(moves)+1)
	for i, m := range moves {
		tr := m.t
		tr.RecordingID, tr.From = grouped[i].ID, grouped[i].State
		wg.Go(func() { got[i], errs[i] = l.Transition(ctx, tr) })
	}
	wg.Go(func() {
		_, errs[len(moves)] = l.Transition(ctx, ledger.Transition{RecordingID: lost.ID, From: ledger.StateReceived, To: ledger.StateEligible, Reason: "ready"})
	})
	wg.Wait()
	checkMergedGroup(t, l, errs)
	for i, m := range moves {
		tr := m.t
		tr.RecordingID, tr.From = twins[i].ID, twins[i].State
		want, err := b.ledger.Transition(ctx, tr)
		if err != nil {
			t.Fatalf("twin of move %d: %v", i, err)
		}
		stored, err := l.Recording(ctx, grouped[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []ledger.Recording{got[i], stored} {
			if r.State != want.State || r.Attempt != want.Attempt || r.EventSeq != want.EventSeq || r.Provider != want.Provider ||
				r.ProviderID != want.ProviderID || !r.NotBefore.Equal(want.NotBefore) || !r.Deadline.Equal(want.Deadline) {
				t.Fatalf("move %d: row %+v, want as its twin's %+v", i, r, want)
			}
		}
		checkTwinEvents(t, l, i, grouped[i].ID, twins[i].ID)
	}
	if r, err := l.Recording(ctx, lost.ID); err != nil || r.EventSeq != lost.EventSeq {
		t.Fatalf("the lost move's recording: %+v %v, want it as it was (seq %d)", r, err, lost.EventSeq)
	}
}

// walkEach ingests a recording for each path and walks it along it.
func (b *bundle) walkEach(t *testing.T, paths [][]ledger.State) []ledger.Recording {
	t.Helper()
	recs := make([]ledger.Recording, len(paths))
	for i, path := range paths {
		recs[i] = b.walk(t, b.ingest(t), path...)
	}
	return recs
}

// checkMergedGroup checks the outcome of a merge test's group: every move
// but the last went through, the last (errs' last) lost its
// compare-and-set, and all were one group, every move in one merged
// statement, none written again alone.
func checkMergedGroup(t *testing.T, l *ledger.Ledger, errs []error) {
	t.Helper()
	n := len(errs)
	for i, err := range errs[:n-1] {
		if err != nil {
			t.Fatalf("move %d: %v", i, err)
		}
	}
	if !errors.Is(errs[n-1], ledger.ErrStateConflict) {
		t.Fatalf("the lost move: err %v, want a state conflict", errs[n-1])
	}
	if st := l.CommitStats(); st.Groups != 1 || st.Items != int64(n) || st.Alone != 0 || st.Merged != int64(n) {
		t.Fatalf("stats %+v: want one group of %d, every move in one merged statement, none alone", st, n)
	}
}

// checkTwinEvents checks that move i's recording id has the history of
// its twin, moved the same way by itself, field by field but for times
// and ids, and returns it.
func checkTwinEvents(t *testing.T, l *ledger.Ledger, i int, id, twin uuid.UUID) []ledger.Event {
	t.Helper()
	evs, err := l.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	twinEvs, err := l.Events(context.Background(), twin)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(twinEvs) {
		t.Fatalf("move %d: %d events, its twin %d", i, len(evs), len(twinEvs))
	}
	for k := range evs {
		e, w := evs[k], twinEvs[k]
		if e.Seq != w.Seq || e.Prior != w.Prior || e.New != w.New || e.Attempt != w.Attempt || e.Reason != w.Reason ||
			e.ResponseClass != w.ResponseClass || !samePtr(e.RetryAfter, w.RetryAfter) || fmt.Sprint(e.Detail) != fmt.Sprint(w.Detail) {
			t.Fatalf("move %d, event %d: %+v, want as its twin's %+v", i, k, e, w)
		}
	}
	return evs
}

func samePtr[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// A group's moves of transcripts (Advance, one or more steps, with or
// without the transcript) are written by one merged statement: each its
// own compare-and-set, each writing what it writes alone (AdvanceTx): the
// row, one event per step in order, and its transcript.
func TestGroupCommitMergesAdvances(t *testing.T) {
	t.Parallel()
	l, b := groupLedger(t, 8, time.Second)
	ctx := context.Background()
	pid := "tr_1"
	tr := func(text string, segs int) *ledger.Transcript {
		out := &ledger.Transcript{Provider: "generic-http", ProviderID: pid, Text: text, Language: "en", Confidence: 0.75, DurationSeconds: 12.5}
		for i := range segs {
			out.Segments = append(out.Segments, ledger.Segment{Start: float64(i), End: float64(i + 1), Text: text, Confidence: 0.5})
		}
		return out
	}
	sub, rw, trd := ledger.StateSubmitted, ledger.StateRetryWait, ledger.StateTranscribed
	val, com, eli := ledger.StateValidated, ledger.StateCommitted, ledger.StateEligible
	moves := []struct {
		path       []ledger.State
		steps      [][2]ledger.State
		transcript *ledger.Transcript
	}{
		{[]ledger.State{eli, sub}, [][2]ledger.State{{sub, trd}, {trd, val}, {val, com}}, tr("call me back", 2)},
		{[]ledger.State{eli, sub}, [][2]ledger.State{{sub, trd}}, tr("", 0)},
		{[]ledger.State{eli, sub, rw}, [][2]ledger.State{{rw, eli}, {eli, sub}}, nil},
		{[]ledger.State{eli, sub, trd}, [][2]ledger.State{{trd, val}}, nil},
		{[]ledger.State{eli, sub}, [][2]ledger.State{{sub, trd}, {trd, val}}, tr("send the quote", 1)},
		{[]ledger.State{eli, sub, trd, val}, [][2]ledger.State{{val, com}}, nil},
		{[]ledger.State{eli, sub}, [][2]ledger.State{{sub, trd}, {trd, val}, {val, com}}, tr("no thanks", 3)},
	}
	advance := func(r ledger.Recording, i int) ledger.Advance {
		a := ledger.Advance{RecordingID: r.ID, Transcript: moves[i].transcript}
		for k, st := range moves[i].steps {
			step := ledger.Transition{From: st[0], To: st[1], Reason: fmt.Sprintf("step %d of move %d", k, i), Detail: map[string]any{"k": float64(k)}}
			if st[1] == trd {
				step.ResponseClass, step.ProviderID = "completed", &pid
			}
			a.Steps = append(a.Steps, step)
		}
		return a
	}
	paths := make([][]ledger.State, len(moves))
	for i, m := range moves {
		paths[i] = m.path
	}
	grouped, twins := b.walkEach(t, paths), b.walkEach(t, paths)
	lost := b.walk(t, b.ingest(t), eli, sub, trd) // its step reads submitted
	queued := func(a ledger.Advance, rec *ledger.Recording) error {
		return l.Committer().CommitQueued(ctx, func(q *ledger.Queue) ledger.FinishFunc {
			move := l.QueueAdvance(q, a)
			return func(ctx context.Context, tx pgx.Tx, batchErr error) error {
				var err error
				*rec, err = move(ctx, tx, batchErr)
				return ledger.KeptUsable(tx, err)
			}
		}, nil)
	}
	var wg sync.WaitGroup
	got := make([]ledger.Recording, len(moves)+1)
	errs := make([]error, len(moves)+1)
	for i := range moves {
		wg.Go(func() { errs[i] = queued(advance(grouped[i], i), &got[i]) })
	}
	wg.Go(func() {
		errs[len(moves)] = queued(ledger.Advance{RecordingID: lost.ID, Transcript: tr("late", 0),
			Steps: []ledger.Transition{{From: sub, To: trd, ProviderID: &pid}}}, &got[len(moves)])
	})
	wg.Wait()
	checkMergedGroup(t, l, errs)
	for i, m := range moves {
		want, err := b.advance(t, advance(twins[i], i))
		if err != nil {
			t.Fatalf("twin of move %d: %v", i, err)
		}
		if g := got[i]; g.State != want.State || g.Attempt != want.Attempt || g.ProviderID != want.ProviderID || !g.NotBefore.Equal(want.NotBefore) ||
			g.EventSeq != want.EventSeq || g.EventSeq != grouped[i].EventSeq+len(m.steps) {
			t.Fatalf("move %d: row %+v, want as its twin's %+v", i, got[i], want)
		}
		if snap, err := ledger.Replay(checkTwinEvents(t, l, i, grouped[i].ID, twins[i].ID)); err != nil || snap != got[i].Snapshot() {
			t.Fatalf("move %d: replay = %+v, %v; row %+v", i, snap, err, got[i].Snapshot())
		}
		gt, gerr := l.Transcript(ctx, grouped[i].ID)
		wt, werr := l.Transcript(ctx, twins[i].ID)
		if (gerr == nil) != (m.transcript != nil) || (gerr == nil) != (werr == nil) {
			t.Fatalf("move %d: transcript errors %v and %v, want one only with a transcript", i, gerr, werr)
		}
		if gerr == nil && (gt.Provider != wt.Provider || gt.ProviderID != wt.ProviderID || gt.Text != wt.Text || gt.Language != wt.Language ||
			gt.Confidence != wt.Confidence || gt.DurationSeconds != wt.DurationSeconds || fmt.Sprint(gt.Segments) != fmt.Sprint(wt.Segments)) {
			t.Fatalf("move %d: transcript %+v, want as its twin's %+v", i, gt, wt)
		}
	}
	if _, err := l.Transcript(ctx, lost.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the lost move's transcript: %v, want none", err)
	}
}
