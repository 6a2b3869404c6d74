-- Named queries of the ledger, loaded by query.go. Names are noun-then-verb.
-- Recordings are selected whole (*) and scanned by column name.

-- name: RecordingLockCall
SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || $2, 7031));

-- name: RecordingGetByKey
SELECT * FROM recordings
WHERE tenant_id = $1 AND call_id = $2 AND audio_sha256 = $3;

-- name: RecordingGet
SELECT * FROM recordings WHERE id = $1;

-- name: RecordingListByCall
SELECT id, audio_sha256
FROM recordings
WHERE tenant_id = $1 AND call_id = $2
ORDER BY created_at, id;

-- name: RecordingInsert
WITH ins AS (
    INSERT INTO recordings (id, tenant_id, call_id, audio_sha256, state, attempt, lane,
                            audio_uri, audio_bytes, deadline, created_at, updated_at, last_event_seq,
                            model, language, started_at, audio_duration_ms)
    VALUES ($1, $2, $3, $4, 'received', 0, $5, $6, $7, $8, $9, $9, 1, $12, $13, $14, $15)
    RETURNING *
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at, reason, detail)
    SELECT id, 1, NULL, 'received', 0, $9, $10, $11 FROM ins
)
SELECT * FROM ins;

-- name: RecordingTransition
WITH upd AS (
    UPDATE recordings
    SET state = $3,
        attempt = attempt + $4,
        updated_at = $5,
        last_event_seq = last_event_seq + 1,
        provider = COALESCE($10, provider),
        provider_id = COALESCE($11, provider_id),
        not_before = CASE WHEN $12::boolean THEN $13 ELSE not_before END,
        deadline = COALESCE($14, deadline)
    WHERE id = $1 AND state = $2
    RETURNING *
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at,
                                  reason, response_class, retry_after_raw, detail)
    SELECT id, last_event_seq, $2, state, attempt, $5, $6, $7, $8, $9 FROM upd
)
SELECT * FROM upd;

-- name: RecordingStateGet
SELECT state FROM recordings WHERE id = $1;

-- name: RecordingEventList
SELECT id, recording_id, seq, prior_state, new_state, attempt, at, reason,
       response_class, retry_after_raw, detail
FROM recording_events
WHERE recording_id = $1
ORDER BY seq;

-- name: ScopeDeferralExtend
-- A deadline that moves forward means a new cooldown: the first request
-- after it must be a probe again.
WITH up AS (
    INSERT INTO scope_deferrals AS d (scope, not_before, updated_at, needs_probe)
    VALUES ($1, $2, $3, true)
    ON CONFLICT (scope) DO UPDATE
    SET not_before = GREATEST(d.not_before, EXCLUDED.not_before),
        updated_at = EXCLUDED.updated_at,
        needs_probe = d.needs_probe OR EXCLUDED.not_before > d.not_before,
        probe_job_id = CASE WHEN EXCLUDED.not_before > d.not_before THEN NULL ELSE d.probe_job_id END
    RETURNING d.scope, d.not_before, d.updated_at
), ext AS (
    INSERT INTO scope_deferral_extensions (scope, offered_not_before, resulting_not_before,
                                           retry_after_raw, source, clamped, job_id,
                                           recording_id, reason, at)
    SELECT up.scope, $2, up.not_before, $4, $5, $6, $7, $8, $9, $3 FROM up
)
SELECT scope, not_before, updated_at FROM up;

-- name: ScopeDeferralGet
SELECT scope, not_before, updated_at, needs_probe, coalesce(probe_job_id, 0), probe_claimed_at,
       paused, paused_reason, paused_at
FROM scope_deferrals WHERE scope = $1;

-- name: ScopeDeferralEnsure
-- Waits for a concurrent first extension of the scope (an uncommitted
-- INSERT) to commit; FOR SHARE alone would not see it. A scope that has
-- none gets a row that defers nothing (not_before at the epoch).
INSERT INTO scope_deferrals (scope, not_before, updated_at)
VALUES ($1, 'epoch', $2)
ON CONFLICT (scope) DO NOTHING;

-- name: ScopeDeferralGetForAdmission
-- FOR SHARE waits for an extension being written to commit, so an admission
-- check that starts after an extension began sees it.
SELECT scope, not_before, updated_at, needs_probe, coalesce(probe_job_id, 0), probe_claimed_at,
       paused, paused_reason, paused_at
FROM scope_deferrals WHERE scope = $1 FOR SHARE;

-- name: ScopeDeferralList
SELECT scope, not_before, updated_at, needs_probe, coalesce(probe_job_id, 0), probe_claimed_at,
       paused, paused_reason, paused_at
FROM scope_deferrals ORDER BY scope;

-- name: ScopeProbeClaim
UPDATE scope_deferrals
SET probe_job_id = $2, probe_claimed_at = $3
WHERE scope = $1 AND needs_probe AND NOT paused AND not_before <= $3
  AND (probe_job_id IS NULL OR probe_job_id = $2 OR probe_claimed_at < $4)
RETURNING scope;

-- name: ScopeProbeSucceed
UPDATE scope_deferrals
SET needs_probe = false, probe_job_id = NULL, probe_claimed_at = NULL
WHERE scope = $1 AND needs_probe AND (probe_job_id = $2 OR $2 = 0);

-- name: ScopePause
INSERT INTO scope_deferrals AS d (scope, not_before, updated_at, paused, paused_reason, paused_at)
VALUES ($1, $2, $2, true, $3, $2)
ON CONFLICT (scope) DO UPDATE
SET paused = true, paused_reason = EXCLUDED.paused_reason, paused_at = EXCLUDED.paused_at,
    updated_at = EXCLUDED.updated_at
RETURNING scope;

-- name: ScopeResume
UPDATE scope_deferrals
SET paused = false, paused_reason = '', paused_at = NULL, updated_at = $2, needs_probe = true, probe_job_id = NULL
WHERE scope = $1 AND paused
RETURNING scope;

-- name: ScopeDeferralObserve
INSERT INTO scope_deferral_extensions (scope, offered_not_before, resulting_not_before, retry_after_raw,
                                       source, clamped, job_id, recording_id, reason, at, observe_only)
VALUES ($1, $2, $2, $4, $5, $6, $7, $8, $9, $3, true);

-- name: ScopeDeferralExtensionList
SELECT id, scope, offered_not_before, resulting_not_before, retry_after_raw, source,
       clamped, job_id, recording_id, reason, at, observe_only, recorded_at
FROM scope_deferral_extensions
WHERE scope = $1
ORDER BY id;

-- name: RetentionPurge
SELECT recordings_deleted, events_deleted FROM ledger_retention_purge($1, $2, $3, $4);

-- name: RecordingNote
WITH upd AS (
    UPDATE recordings
    SET attempt = attempt + $3,
        updated_at = $4,
        last_event_seq = last_event_seq + 1,
        provider = COALESCE($9, provider),
        provider_id = COALESCE($10, provider_id)
    WHERE id = $1 AND state = $2
    RETURNING *
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at,
                                  reason, response_class, retry_after_raw, detail)
    SELECT id, last_event_seq, state, state, attempt, $4, $5, $6, $7, $8 FROM upd
)
SELECT * FROM upd;

-- name: TranscriptInsert
INSERT INTO transcripts (recording_id, provider, provider_id, text, language, confidence,
                         duration_seconds, segments, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: TranscriptGet
SELECT recording_id, provider, provider_id, text, language, confidence, duration_seconds, segments, created_at
FROM transcripts WHERE recording_id = $1;

-- name: RecordingList
SELECT * FROM recordings
WHERE ($1 = '' OR state = $1) AND ($2 = '' OR tenant_id = $2)
  AND ($4::timestamptz IS NULL OR created_at >= $4) AND ($5::timestamptz IS NULL OR created_at < $5)
ORDER BY created_at, id
LIMIT $3;

-- name: RecordingListByCallID
SELECT * FROM recordings WHERE tenant_id = $1 AND call_id = $2 ORDER BY created_at, id;

-- name: RecordingListOverdue
SELECT id FROM recordings
WHERE deadline < $1 AND state NOT IN ('committed', 'expired', 'failed')
ORDER BY deadline
LIMIT $2;

-- name: RecordingCountByState
SELECT state, count(*) FROM recordings GROUP BY state ORDER BY state;
