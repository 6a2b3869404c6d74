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
//     transaction.
//   - Events are never updated or deleted: the database refuses it. The one
//     exception is RetentionPurge, which removes whole histories of terminal
//     recordings older than the retention age and records each batch.
//   - A scope's deferral deadline only moves forward (GREATEST), and every
//     offer is recorded with its raw header and the job that caused it.
//
// What it does not do: it makes no network calls and holds no connection
// between calls; it does not decide deadlines (package retryafter does) or
// run jobs (package jobs does). It logs nothing personal: no transcript
// text, no audio URLs.
package ledger
