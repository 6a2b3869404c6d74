-- Scope deferrals: the shared "not before" of a throttling scope, its
-- admission state (probe, pause) and every offer made to it.

-- name: ScopeDeferralExtend :one
-- A deadline that moves forward means a new cooldown: the first request
-- after it must be a probe again. The offer takes the scope's next
-- sequence number (seq), written with it: an admission that read seq n
-- knew exactly the offers numbered up to n.
WITH up AS (
    INSERT INTO scope_deferrals AS d (scope, not_before, updated_at, needs_probe, seq)
    VALUES (@scope::text, @offered_not_before::timestamptz, @at::timestamptz, true, 1)
    ON CONFLICT (scope) DO UPDATE
    SET not_before = GREATEST(d.not_before, EXCLUDED.not_before),
        updated_at = EXCLUDED.updated_at,
        needs_probe = d.needs_probe OR EXCLUDED.not_before > d.not_before,
        probe_job_id = CASE WHEN EXCLUDED.not_before > d.not_before THEN NULL ELSE d.probe_job_id END,
        seq = d.seq + 1
    RETURNING d.scope, d.not_before, d.updated_at, d.seq
), ext AS (
    INSERT INTO scope_deferral_extensions (scope, offered_not_before, resulting_not_before,
                                           retry_after_raw, source, clamped, job_id,
                                           recording_id, reason, at, seq)
    SELECT up.scope, @offered_not_before::timestamptz, up.not_before, sqlc.narg(retry_after_raw)::text,
           @source::text, @clamped::boolean, sqlc.narg(job_id)::bigint, sqlc.narg(recording_id)::uuid,
           @reason::text, @at::timestamptz, up.seq
    FROM up
)
SELECT up.scope, up.not_before, up.updated_at, up.seq FROM up;

-- name: ScopeDeferralObserve :exec
-- An observe-only offer: recorded with the others and numbered like them,
-- the deadline unmoved.
WITH up AS (
    INSERT INTO scope_deferrals AS d (scope, not_before, updated_at, seq)
    VALUES (@scope::text, 'epoch', @at::timestamptz, 1)
    ON CONFLICT (scope) DO UPDATE SET seq = d.seq + 1
    RETURNING d.scope, d.seq
)
INSERT INTO scope_deferral_extensions (scope, offered_not_before, resulting_not_before, retry_after_raw,
                                       source, clamped, job_id, recording_id, reason, at, observe_only, seq)
SELECT up.scope, @offered_not_before::timestamptz, @offered_not_before::timestamptz,
       sqlc.narg(retry_after_raw)::text, @source::text, @clamped::boolean, sqlc.narg(job_id)::bigint,
       sqlc.narg(recording_id)::uuid, @reason::text, @at::timestamptz, true, up.seq
FROM up;

-- name: ScopeDeferralGet :one
SELECT * FROM scope_deferrals WHERE scope = @scope;

-- name: ScopeDeferralEnsure :exec
-- Waits for a concurrent first extension of the scope (an uncommitted
-- INSERT) to commit: the key of ScopeDeferralReadLock is taken at the end
-- of that INSERT's statement, so a read in between would miss it. A scope that has
-- none gets a row that defers nothing (not_before at the epoch).
INSERT INTO scope_deferrals (scope, not_before, updated_at)
VALUES (@scope, 'epoch', @at)
ON CONFLICT (scope) DO NOTHING;

-- name: ScopeDeferralReadLock :exec
-- An admission's wait for an extension being written (migration 00020):
-- the scope's key shared, sent just before the read in the same
-- transaction. Every write of scope_deferrals holds the key exclusive until
-- it commits, so the read that follows, with a snapshot of its own, sees
-- every extension that began before it.
-- The key is scope_deferral_lock_key's expression written out, not a call
-- of it: the function pins its search_path, and PostgreSQL sets and
-- restores that setting on every call (about 25 µs, ten times the rest of
-- the statement; this one runs for every transcription and delivery).
-- Every name is qualified, so the statement resolves the same whatever
-- the session's search_path. TestReadLockKeyIsTheWritersKey holds the two
-- equal.
SELECT pg_catalog.pg_advisory_xact_lock_shared(
    pg_catalog.hashtextextended(pg_catalog.textcat('scope_deferrals:', @scope::text), 7033));

-- name: ScopeDeferralGetForAdmission :one
-- The read of an admission check, after ScopeDeferralReadLock in the same
-- transaction. db_now is the database's clock at the read: admission
-- compares the deadline to it.
SELECT sqlc.embed(d), clock_timestamp()::timestamptz AS db_now
FROM scope_deferrals d WHERE d.scope = @scope;

-- name: ScopeDeferralList :many
SELECT * FROM scope_deferrals ORDER BY scope;

-- name: ScopeDeferralExtensionList :many
SELECT * FROM scope_deferral_extensions
WHERE scope = @scope
ORDER BY seq;

-- name: ScopeProbeClaim :one
-- Claims the scope's probe for a job: when none is out, the job already
-- holds it, or the holder's claim is older than claim_expired_before.
UPDATE scope_deferrals
SET probe_job_id = @job_id::bigint, probe_claimed_at = @now::timestamptz
WHERE scope = @scope AND needs_probe AND NOT paused AND not_before <= @now::timestamptz
  AND (probe_job_id IS NULL OR probe_job_id = @job_id::bigint OR probe_claimed_at < @claim_expired_before::timestamptz)
RETURNING scope;

-- name: ScopeProbeSucceed :exec
-- job_id 0 reopens the scope whoever holds the probe.
UPDATE scope_deferrals
SET needs_probe = false, probe_job_id = NULL, probe_claimed_at = NULL
WHERE scope = @scope AND needs_probe AND (probe_job_id = @job_id::bigint OR @job_id::bigint = 0);

-- name: ScopePause :exec
INSERT INTO scope_deferrals AS d (scope, not_before, updated_at, paused, paused_reason, paused_at)
VALUES (@scope::text, @at::timestamptz, @at::timestamptz, true, @reason::text, @at::timestamptz)
ON CONFLICT (scope) DO UPDATE
SET paused = true, paused_reason = EXCLUDED.paused_reason, paused_at = EXCLUDED.paused_at,
    updated_at = EXCLUDED.updated_at;

-- name: ScopeResume :one
UPDATE scope_deferrals
SET paused = false, paused_reason = '', paused_at = NULL, updated_at = @at::timestamptz, needs_probe = true,
    probe_job_id = NULL
WHERE scope = @scope AND paused
RETURNING scope;

-- name: ScopeDeferralAdopt :one
-- A renamed scope takes over its former name's admission state, once: the
-- deadline, whether the next request must be a probe, a pause. Nothing is
-- written when the new name already has a row (taken over, or used,
-- before) or the former one has none. The former name's row and offers
-- stay as they are, to be read.
INSERT INTO scope_deferrals (scope, not_before, updated_at, needs_probe, paused, paused_reason, paused_at)
SELECT @new_scope::text, f.not_before, @at::timestamptz, f.needs_probe, f.paused, f.paused_reason, f.paused_at
FROM scope_deferrals f WHERE f.scope = @former_scope::text
ON CONFLICT (scope) DO NOTHING
RETURNING scope;

-- name: RecordingGetWithScope :one
-- A step's one read: the recording and, when the scope has its row, the
-- scope's deferral, with the database's clock; after ScopeDeferralReadLock
-- in the same transaction (as ScopeDeferralGetForAdmission: so it waits
-- for an extension being written to commit).
-- d_scope is '' when the scope has no row.
SELECT sqlc.embed(r),
       coalesce(d.scope, '')::text AS d_scope, coalesce(d.not_before, 'epoch')::timestamptz AS d_not_before,
       coalesce(d.updated_at, 'epoch')::timestamptz AS d_updated_at, coalesce(d.needs_probe, false)::boolean AS d_needs_probe,
       d.probe_job_id AS d_probe_job_id, d.probe_claimed_at AS d_probe_claimed_at, coalesce(d.paused, false)::boolean AS d_paused,
       coalesce(d.paused_reason, '')::text AS d_paused_reason, d.paused_at AS d_paused_at,
       coalesce(d.seq, 0)::bigint AS d_seq, clock_timestamp()::timestamptz AS db_now
FROM recordings r
LEFT JOIN LATERAL (SELECT * FROM scope_deferrals s WHERE s.scope = @scope) d ON true
WHERE r.id = @id;

-- name: DatabaseNow :one
-- The database's clock.
SELECT clock_timestamp()::timestamptz AS db_now;

-- name: ScopeDeferralCounts :one
-- Scopes whose deadline is still ahead at @at (not paused), and scopes
-- paused until an operator resumes them.
SELECT count(*) FILTER (WHERE not_before > @at::timestamptz AND NOT paused)::bigint AS cooling,
       count(*) FILTER (WHERE paused)::bigint AS paused
FROM scope_deferrals;
