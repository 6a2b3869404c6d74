// Package outbox commits a recording's follow-up actions and delivers them
// to the tenant's CRM, exactly once in effect.
//
// Commit writes, in one transaction, the action set (unique on tenant, call
// and action version), its outbox row, the River job that delivers it
// (crm_deliver) and the recording's validated -> committed transition.
// PrepareCommitTx (and CommitStep, the pipeline's commit) writes the same
// but hands the transition back for the caller to apply in its own
// transaction with its other moves of the recording. The
// dispatcher delivers the set through package crm/connector with the
// idempotency key tenant_id:call_id:action_version and the try's number;
// replay runs (ReplayStart, ReplayEnumerate) send committed sets again
// with their original keys to a named staging target, as River jobs of
// their own queue that take the same admission as every delivery; Retry
// re-drives a dead row with a fresh deadline.
//
// # What it guarantees
//
//   - A set is committed together with its delivery or not at all: no set
//     without an outbox row and job, no job without its set.
//   - Workers racing on one commit converge: the loser meets the uniqueness
//     conflict, counts it (duplicate_key_conflicts) and returns the
//     winner's set; nothing is written twice.
//   - Every try, retry and replay appends an outbox event; rows move
//     pending -> delivered or pending -> dead, and only an operator's retry
//     moves dead back to pending. Action sets and outbox events are never
//     updated or deleted (the database refuses it).
//   - No delivery is pending forever. Each row has a deadline, fixed at
//     commit (commit time + its Destination's DeliveryDeadline, default
//     24h) and renewed only by Retry (retry time + DeliveryDeadline). A try
//     due at or after it, or a CRM answer that puts the next try at or
//     after it, moves the row to dead with a reason saying so, and its job
//     ends; a job never snoozes past its row's deadline. The periodic
//     sweep (PeriodicJobs, Sweep) ends rows whose job is gone, once they
//     are SweepGrace past their deadline.
//   - A CRM's throttling (429, and 503 with Retry-After) defers the tenant's
//     CRM integration scope in the ledger, exactly like a speech vendor's:
//     deliveries to that CRM wait, the pipeline does not. Transient failures
//     back off; permanent ones go to dead, reviewable.
//   - With a window (Config.Window, the capacity.Windows the speech
//     pipeline uses), a CRM scope has at most its window's size of tries in
//     flight, from every process: a try takes a slot (holder
//     "outbox:<row id>") after the scope admits it and gives it back on
//     every way out of the try, with what the CRM said (a real answer
//     grows the window, throttling shrinks it, a transient failure says
//     nothing); a throttle that defers the scope restarts the window from
//     its probe. Tries the window or the scope's deferral refuses wait in
//     the scope's line, the earliest delivery deadline first, and each
//     freed slot wakes the next in line (its River job made available),
//     instead of every waiter waking at once.
//   - No transaction or pooled connection is held across the call to the
//     CRM.
//
// # What it does not do
//
// It does not extract actions (package crm does) or speak any CRM's API
// (package crm/connector does), and it does not make a CRM idempotent: exactly
// once in effect relies on the CRM applying each key once, as crm-webhook/v1
// requires. It logs no transcript text and no credentials.
package outbox
