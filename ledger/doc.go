// Package ledger is callscribe's durable record, in PostgreSQL: one current
// row per recording, its append-only event history, and the scope
// deferrals that throttled vendors and CRMs impose.
//
// Guarantees:
//
//   - A recording's identity is its business key tenant_id:call_id:sha256.
//     Ingesting it again returns the existing row; the same call with
//     another digest is a new recording, flagged in its first event.
//   - The state machine (Edges) is defined once here and enforced again by
//     database triggers: no code path, not even raw SQL, can skip a state or
//     change state without appending its event.
//   - Every transition is a compare-and-set on (id, state) plus one event,
//     in one short transaction; the loser of a race gets a
//     *StateConflictError and writes nothing. The Tx forms join a caller's
//     transaction. AdvanceTx moves a row through several transitions in
//     one statement, still one event per step; the database walks the
//     steps' events at the end of that statement.
//   - Events are never updated or deleted: the database refuses it. The one
//     exception is RetentionPurge, which removes whole histories of terminal
//     recordings older than the retention age and records each batch.
//   - A scope's deferral deadline only moves forward (GREATEST), and every
//     offer is recorded with its raw header and the job that caused it.
//   - Speech vendors and CRMs are throttled the same way: a ThrottleSignal
//     (the answer's raw Retry-After, the vendor's own delay or reset, its
//     class) becomes a deadline by one ThrottlePolicy
//     (ScopeDeferralFromSignal), and jobs are admitted by one check that
//     also says how long a refused job waits, with jitter (ScopeAdmitWait).
//
// What it does not do: it makes no network calls and holds no connection
// between calls; it does not parse timing headers (package retryafter does,
// and ThrottlePolicy applies it) or run jobs (package jobs does), and it
// does not read the adapters' responses (their callers build the signal).
// It logs nothing personal: no transcript text, no audio URLs.
package ledger
