package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

func TestNotesAndTranscript(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.walk(t, b.ingest(t), ledger.StateEligible)
	prov, pid := "generic-http", "tr_1"
	r, err := b.ledger.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: r.State, To: ledger.StateSubmitted, Provider: &prov})
	if err != nil {
		t.Fatal(err)
	}
	r, err = b.ledger.Note(ctx, ledger.Note{RecordingID: r.ID, State: ledger.StateSubmitted, Reason: "accepted", ResponseClass: "accepted", ProviderID: &pid})
	if err != nil || r.ProviderID != pid || r.Provider != prov || r.Attempt != 1 {
		t.Fatalf("accepted note: %+v, %v", r, err)
	}
	r, err = b.ledger.Note(ctx, ledger.Note{RecordingID: r.ID, State: ledger.StateSubmitted, Reason: "resubmitted: vendor never saw it", Submission: true})
	if err != nil || r.Attempt != 2 || r.State != ledger.StateSubmitted {
		t.Fatalf("resubmission note: %+v, %v", r, err)
	}
	if _, err := b.ledger.Note(ctx, ledger.Note{RecordingID: r.ID, State: ledger.StateEligible}); !errors.Is(err, ledger.ErrStateConflict) {
		t.Fatalf("stale note: %v", err)
	}
	if _, err := b.ledger.Note(ctx, ledger.Note{RecordingID: r.ID, State: ledger.StateEligible, Submission: true}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("resubmission outside submitted: %v", err)
	}

	tr := ledger.Transcript{Provider: prov, ProviderID: pid, Text: "hello there", Language: "en", Confidence: 0.9, DurationSeconds: 3.2,
		Segments: []ledger.Segment{{Start: 0, End: 1.5, Text: "hello", Confidence: 0.95}}}
	r, err = b.ledger.RecordTranscript(ctx, ledger.Transition{RecordingID: r.ID, From: ledger.StateSubmitted, To: ledger.StateTranscribed, ResponseClass: "completed"}, tr)
	if err != nil || r.State != ledger.StateTranscribed {
		t.Fatalf("RecordTranscript: %+v, %v", r, err)
	}
	got, err := b.ledger.Transcript(ctx, r.ID)
	if err != nil || got.Text != tr.Text || len(got.Segments) != 1 || got.Segments[0].Text != "hello" || got.Confidence != 0.9 {
		t.Fatalf("Transcript = %+v, %v", got, err)
	}
	// A second transcript for the same recording is refused with the move.
	if _, err := b.ledger.RecordTranscript(ctx, ledger.Transition{RecordingID: r.ID, From: ledger.StateSubmitted, To: ledger.StateTranscribed}, tr); !errors.Is(err, ledger.ErrStateConflict) {
		t.Fatalf("second transcript: %v", err)
	}
	evs, err := b.ledger.Events(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := ledger.Replay(evs)
	if err != nil || snap != r.Snapshot() {
		t.Fatalf("replay with notes = %+v, %v; row %+v", snap, err, r.Snapshot())
	}
}

func TestRetryWaitNotBeforeAndRedrive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.walk(t, b.ingest(t), ledger.StateEligible, ledger.StateSubmitted)
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r, err := b.ledger.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: r.State, To: ledger.StateRetryWait, NotBefore: &at})
	if err != nil || !r.NotBefore.Equal(at) {
		t.Fatalf("retry_wait not_before = %v, %v", r.NotBefore, err)
	}
	r = b.walk(t, r, ledger.StateEligible)
	if !r.NotBefore.IsZero() {
		t.Fatalf("not_before survived leaving retry_wait: %v", r.NotBefore)
	}
	r = b.walk(t, r, ledger.StateExpired)
	deadline := at.Add(24 * time.Hour)
	r, err = b.ledger.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: ledger.StateExpired, To: ledger.StateEligible, Reason: "operator retry", Deadline: &deadline})
	if err != nil || !r.Deadline.Equal(deadline) || r.State != ledger.StateEligible {
		t.Fatalf("re-drive: %+v, %v", r, err)
	}
}

func TestScopeAdmissionProbePauseObserve(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const scope = "generic:k1:general"

	a, err := b.ledger.ScopeAdmit(ctx, scope, 1, time.Minute, time.Second)
	if err != nil || a.Verdict != ledger.VerdictAdmit {
		t.Fatalf("fresh scope: %+v, %v", a, err)
	}
	now := b.clock.Now()
	if _, err := b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: scope, NotBefore: now.Add(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	a, _ = b.ledger.ScopeAdmit(ctx, scope, 1, time.Minute, time.Second)
	if a.Verdict != ledger.VerdictDeferred || !a.Until.Equal(now.Add(10*time.Second).Truncate(time.Microsecond)) {
		t.Fatalf("during cooldown: %+v", a)
	}
	b.clock.Advance(11 * time.Second)
	first, _ := b.ledger.ScopeAdmit(ctx, scope, 1, time.Minute, time.Second)
	second, _ := b.ledger.ScopeAdmit(ctx, scope, 2, time.Minute, time.Second)
	again, _ := b.ledger.ScopeAdmit(ctx, scope, 1, time.Minute, time.Second)
	if first.Verdict != ledger.VerdictProbe || second.Verdict != ledger.VerdictProbeOut || again.Verdict != ledger.VerdictProbe {
		t.Fatalf("after cooldown: first %s, second %s, first again %s; want probe, probe-out, probe", first.Verdict, second.Verdict, again.Verdict)
	}
	// A stale probe is taken over.
	b.clock.Advance(2 * time.Minute)
	if takeover, _ := b.ledger.ScopeAdmit(ctx, scope, 2, time.Minute, time.Second); takeover.Verdict != ledger.VerdictProbe {
		t.Fatalf("stale probe not taken over: %s", takeover.Verdict)
	}
	if err := b.ledger.ScopeProbeSucceeded(ctx, scope, 2); err != nil {
		t.Fatal(err)
	}
	if open, _ := b.ledger.ScopeAdmit(ctx, scope, 3, time.Minute, time.Second); open.Verdict != ledger.VerdictAdmit {
		t.Fatalf("after a successful probe: %s", open.Verdict)
	}

	if err := b.ledger.ScopePause(ctx, scope, "insufficient_quota"); err != nil {
		t.Fatal(err)
	}
	if p, _ := b.ledger.ScopeAdmit(ctx, scope, 3, time.Minute, time.Second); p.Verdict != ledger.VerdictPaused || p.Deferral.PausedReason != "insufficient_quota" {
		t.Fatalf("paused scope: %+v", p)
	}
	if err := b.ledger.ScopeResume(ctx, scope); err != nil {
		t.Fatal(err)
	}
	if err := b.ledger.ScopeResume(ctx, scope); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("resuming a running scope: %v", err)
	}
	if p, _ := b.ledger.ScopeAdmit(ctx, scope, 3, time.Minute, time.Second); p.Verdict != ledger.VerdictProbe {
		t.Fatalf("resumed scope starts with a probe: %s", p.Verdict)
	}

	before, _ := b.ledger.ScopeDeferral(ctx, scope)
	if err := b.ledger.ScopeDeferralObserve(ctx, ledger.Extension{Scope: scope, NotBefore: b.clock.Now().Add(time.Hour), Source: "retry-after"}); err != nil {
		t.Fatal(err)
	}
	after, _ := b.ledger.ScopeDeferral(ctx, scope)
	if !after.NotBefore.Equal(before.NotBefore) {
		t.Fatalf("observe-only moved the deadline: %s -> %s", before.NotBefore, after.NotBefore)
	}
	exts, _ := b.ledger.ScopeDeferralExtensions(ctx, scope)
	if last := exts[len(exts)-1]; !last.ObserveOnly {
		t.Fatalf("observe-only offer not recorded as such: %+v", last)
	}
	all, err := b.ledger.ScopeDeferrals(ctx)
	if err != nil || len(all) != 1 || all[0].Scope != scope {
		t.Fatalf("ScopeDeferrals = %+v, %v", all, err)
	}
}

// An admission check that starts while another worker's first deferral of
// the scope is still uncommitted waits for it and sees it.
func TestScopeAdmitSeesAConcurrentFirstDeferral(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ledger.ScopeDeferralExtendTx(ctx, tx, ledger.Extension{Scope: "fresh", NotBefore: b.clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	got := make(chan ledger.Admission, 1)
	go func() {
		a, err := b.ledger.ScopeAdmit(ctx, "fresh", 1, time.Minute, time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- a
	}()
	select {
	case a := <-got:
		t.Fatalf("admission answered %s before the first deferral committed", a.Verdict)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-got; a.Verdict != ledger.VerdictDeferred {
		t.Fatalf("admission after the first deferral committed: %s, want deferred", a.Verdict)
	}
}

// A step's combined read (RecordingWithScope) and the admission decided
// from it see a deferral being written when the read began, whether the
// scope already had its row or not: the statement that wrote it holds the
// scope's key until its transaction commits, and the read waits for the
// key, then finds the row.
func TestAdmitFromCombinedReadSeesAConcurrentDeferral(t *testing.T) {
	t.Parallel()
	for _, existing := range []bool{true, false} {
		t.Run(fmt.Sprintf("scope row exists=%v", existing), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			rec := b.ingest(t)
			scope := fmt.Sprintf("combined-%v", existing)
			if existing {
				if a, err := b.ledger.ScopeAdmit(ctx, scope, 1, time.Minute, time.Second); err != nil || a.Verdict != ledger.VerdictAdmit {
					t.Fatalf("first admission: %+v, %v", a, err)
				}
			}
			tx, err := b.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			until := b.clock.Now().Add(time.Hour)
			if _, err := b.ledger.ScopeDeferralExtendTx(ctx, tx, ledger.Extension{Scope: scope, NotBefore: until}); err != nil {
				t.Fatal(err)
			}
			type result struct {
				rec  ledger.Recording
				read ledger.ScopeRead
				a    ledger.Admission
				err  error
			}
			got := make(chan result, 1)
			go func() {
				var r result
				r.rec, r.read, r.err = b.ledger.RecordingWithScope(ctx, rec.ID, scope)
				if r.err == nil {
					r.a, r.err = b.ledger.ScopeAdmitWaitFrom(ctx, r.read, 2, ledger.AdmitPolicy{ProbeTimeout: time.Minute, ProbeWait: time.Second})
				}
				got <- r
			}()
			select {
			case r := <-got:
				t.Fatalf("answered %s before the deferral committed (%v)", r.a.Verdict, r.err)
			case <-time.After(200 * time.Millisecond):
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.rec.ID != rec.ID || r.rec.State != rec.State {
				t.Fatalf("recording read as %s in %s, want %s in %s", r.rec.ID, r.rec.State, rec.ID, rec.State)
			}
			if !r.read.Found {
				t.Fatalf("scope row not found after the deferral committed")
			}
			if r.a.Verdict != ledger.VerdictDeferred || !r.a.Until.Equal(until) || r.a.Wait <= 0 {
				t.Fatalf("admission %+v, want deferred until %s with a wait", r.a, until)
			}
		})
	}
}

// RecordingWithScope of a recording that does not exist is ErrNotFound.
func TestRecordingWithScopeNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, _, err := b.ledger.RecordingWithScope(context.Background(), uuid.New(), "any"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

// A scope read queued on a caller's batch (QueueScopeRead) is the
// admission's read: it waits for an extension being written, and it runs
// in the batch's one implicit transaction with the caller's statements.
func TestQueuedScopeReadSeesAConcurrentDeferralInTheBatchTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const scope = "queued-read"
	if a, err := b.ledger.ScopeAdmit(ctx, scope, 1, time.Minute, time.Second); err != nil || a.Verdict != ledger.VerdictAdmit {
		t.Fatalf("first admission: %+v, %v", a, err)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	until := b.clock.Now().Add(time.Hour)
	if _, err := b.ledger.ScopeDeferralExtendTx(ctx, tx, ledger.Extension{Scope: scope, NotBefore: until}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		before, after string // the batch's transaction id, read before and after the scope
		read          *ledger.ScopeRead
		err           error
	}
	got := make(chan result, 1)
	go func() {
		var r result
		batch := &pgx.Batch{}
		batch.Queue("SELECT pg_current_xact_id()::text").QueryRow(func(row pgx.Row) error { return row.Scan(&r.before) })
		r.read = b.ledger.QueueScopeRead(batch, scope)
		batch.Queue("SELECT pg_current_xact_id()::text").QueryRow(func(row pgx.Row) error { return row.Scan(&r.after) })
		r.err = b.pool.SendBatch(ctx, batch).Close()
		got <- r
	}()
	select {
	case r := <-got:
		t.Fatalf("the queued read answered before the deferral committed (%+v, %v)", r.read, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.before == "" || r.before != r.after {
		t.Fatalf("transaction ids %q and %q: the batch did not run as one transaction", r.before, r.after)
	}
	if !r.read.Found || !r.read.Deferral.NotBefore.Equal(until) {
		t.Fatalf("read %+v, want the scope's row deferred until %s", r.read, until)
	}
	a, err := b.ledger.ScopeAdmitWaitFrom(ctx, *r.read, 2, ledger.AdmitPolicy{ProbeTimeout: time.Minute, ProbeWait: time.Second})
	if err != nil || a.Verdict != ledger.VerdictDeferred || !a.Until.Equal(until) {
		t.Fatalf("admission %+v, %v; want deferred until %s", a, err, until)
	}
}

// Every write of a scope's row makes an admission's read wait for its
// commit, whatever statement writes it (migration 00020's trigger, not the
// ledger's queries, takes the scope's key): here a raw UPDATE pausing the
// scope. And the read locks no row: a transaction holding the row FOR
// UPDATE without writing it does not hold the read back.
func TestAdmissionReadWaitsForEveryWriteOfTheScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rec := b.ingest(t)
	const scope = "raw-write"
	if a, err := b.ledger.ScopeAdmit(ctx, scope, 1, time.Minute, time.Second); err != nil || a.Verdict != ledger.VerdictAdmit {
		t.Fatalf("first admission: %+v, %v", a, err)
	}

	locker, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctx, "SELECT 1 FROM scope_deferrals WHERE scope = $1 FOR UPDATE", scope); err != nil {
		t.Fatal(err)
	}
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, read, err := b.ledger.RecordingWithScope(readCtx, rec.ID, scope)
	cancel()
	if err != nil || !read.Found || read.Deferral.Paused {
		t.Fatalf("read beside a row held FOR UPDATE: %+v, %v; want the row, unpaused, without waiting", read, err)
	}
	_ = locker.Rollback(ctx)

	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "UPDATE scope_deferrals SET paused = true, paused_reason = 'raw', paused_at = now() WHERE scope = $1", scope); err != nil {
		t.Fatal(err)
	}
	got := make(chan ledger.ScopeRead, 1)
	go func() {
		_, read, err := b.ledger.RecordingWithScope(ctx, rec.ID, scope)
		if err != nil {
			t.Error(err)
		}
		got <- read
	}()
	select {
	case r := <-got:
		t.Fatalf("the read answered (paused=%v) before the raw write committed", r.Deferral.Paused)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-got; !r.Found || !r.Deferral.Paused {
		t.Fatalf("read after the raw write committed: %+v, want the scope paused", r)
	}
}

// The admission's read takes the key every writer of scope_deferrals
// takes (scope_deferral_lock_key, through scope_deferral_write_lock), for
// any scope name: the read statement writes the function's expression out
// rather than calling it (a pinned function costs a setting change per
// call). Checked on the statement itself, by the advisory lock it holds.
func TestReadLockKeyIsTheWritersKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := dbsqlc.New()
	rapid.Check(t, func(rt *rapid.T) {
		scope := rapid.StringMatching(`[^\x00]{0,80}`).Draw(rt, "scope")
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := q.ScopeDeferralReadLock(ctx, tx, scope); err != nil {
			rt.Fatal(err)
		}
		var held, want int64
		if err := tx.QueryRow(ctx, `SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks
			WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND mode = 'ShareLock' AND objsubid = 1`).Scan(&held); err != nil {
			rt.Fatalf("the read lock's advisory key: %v", err)
		}
		if err := tx.QueryRow(ctx, `SELECT scope_deferral_lock_key($1)`, scope).Scan(&want); err != nil {
			rt.Fatal(err)
		}
		if held != want {
			rt.Fatalf("scope %q: the read holds key %d, writers take %d", scope, held, want)
		}
	})
}
