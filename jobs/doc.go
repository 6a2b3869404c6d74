// Package jobs is callscribe's transcription pipeline: the River job args
// and the workers that drive each recording through the ledger's state
// machine, from received to validated (and on to committed when an outbox
// is set).
//
// Ingest reads a recording once (SHA-256 digest, size limit, WAV header),
// then writes the ledger row and the River job that drives it in one
// transaction; ingesting the same recording again converges on the same
// row. The transcribe worker (Pipeline) takes a recording one step at a
// time: admission through its throttling scope, submission to the speech
// vendor (package jobs/stt), the vendor's answer applied by the response
// table of stt-http/v1, polling, reconciliation by idempotency key after a
// crash, validation of the transcript, and the commit of its follow-up
// actions through package outbox. The deadline sweep (SweepArgs) expires
// overdue work; Retry and Revalidate are the operator's re-drives.
//
// # What it guarantees
//
//   - Everything a worker knows is in the ledger: a killed job resumes where
//     the ledger says, and any number of worker processes may run at once.
//   - No database transaction or pooled connection is held across a call to
//     a vendor. A job that must wait (a deferred or paused scope, a probe out,
//     no vendor slot) snoozes its River job without using an attempt, and
//     holds nothing meanwhile.
//   - Admission honours the shared scope deadline: no submission is sent
//     while the ledger records a cooldown for its scope; after a cooldown
//     exactly one job probes and the rest wait for its answer.
//   - A recording found in submitted without an answer is reconciled (the
//     vendor is asked by key) before it is submitted again, so it is
//     transcribed once where the vendor can be asked.
//   - A throttled answer moves the scope deadline forward only
//     (ledger/retryafter decides it, the ledger stores it); transient errors
//     back off for the one recording; permanent ones end in failed; every
//     recording has a deadline and ends in expired past it.
//
// # What it does not do
//
// It does not build the River client or the database pool (the command
// does), count vendor slots (it asks a Slots, a capacity.Leases in
// production), speak to a CRM (package outbox does), or decide timing
// policy (package ledger/retryafter does). It logs no transcript text and
// no audio URL.
package jobs
