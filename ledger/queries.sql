-- Named queries of the ledger, loaded by query.go. Names are noun-then-verb.
-- Recording columns are always selected in the order of recordingColumns.

-- name: RecordingLockCall
SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || $2, 7031));

-- name: RecordingGetByKey
SELECT id, tenant_id, call_id, audio_sha256, business_key, state, attempt, lane,
       audio_uri, audio_bytes, deadline, created_at, updated_at, last_event_seq
FROM recordings
WHERE tenant_id = $1 AND call_id = $2 AND audio_sha256 = $3;

-- name: RecordingGet
SELECT id, tenant_id, call_id, audio_sha256, business_key, state, attempt, lane,
       audio_uri, audio_bytes, deadline, created_at, updated_at, last_event_seq
FROM recordings
WHERE id = $1;

-- name: RecordingListByCall
SELECT id, audio_sha256
FROM recordings
WHERE tenant_id = $1 AND call_id = $2
ORDER BY created_at, id;

-- name: RecordingInsert
WITH ins AS (
    INSERT INTO recordings (id, tenant_id, call_id, audio_sha256, state, attempt, lane,
                            audio_uri, audio_bytes, deadline, created_at, updated_at, last_event_seq)
    VALUES ($1, $2, $3, $4, 'received', 0, $5, $6, $7, $8, $9, $9, 1)
    RETURNING *
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at, reason, detail)
    SELECT id, 1, NULL, 'received', 0, $9, $10, $11 FROM ins
)
SELECT id, tenant_id, call_id, audio_sha256, business_key, state, attempt, lane,
       audio_uri, audio_bytes, deadline, created_at, updated_at, last_event_seq
FROM ins;

-- name: RecordingTransition
WITH upd AS (
    UPDATE recordings
    SET state = $3,
        attempt = attempt + $4,
        updated_at = $5,
        last_event_seq = last_event_seq + 1
    WHERE id = $1 AND state = $2
    RETURNING *
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at,
                                  reason, response_class, retry_after_raw, detail)
    SELECT id, last_event_seq, $2, state, attempt, $5, $6, $7, $8, $9 FROM upd
)
SELECT id, tenant_id, call_id, audio_sha256, business_key, state, attempt, lane,
       audio_uri, audio_bytes, deadline, created_at, updated_at, last_event_seq
FROM upd;

-- name: RecordingStateGet
SELECT state FROM recordings WHERE id = $1;

-- name: RecordingEventList
SELECT id, recording_id, seq, prior_state, new_state, attempt, at, reason,
       response_class, retry_after_raw, detail
FROM recording_events
WHERE recording_id = $1
ORDER BY seq;

-- name: ScopeDeferralExtend
WITH up AS (
    INSERT INTO scope_deferrals AS d (scope, not_before, updated_at)
    VALUES ($1, $2, $3)
    ON CONFLICT (scope) DO UPDATE
    SET not_before = GREATEST(d.not_before, EXCLUDED.not_before),
        updated_at = EXCLUDED.updated_at
    RETURNING d.scope, d.not_before, d.updated_at
), ext AS (
    INSERT INTO scope_deferral_extensions (scope, offered_not_before, resulting_not_before,
                                           retry_after_raw, source, clamped, job_id,
                                           recording_id, reason, at)
    SELECT up.scope, $2, up.not_before, $4, $5, $6, $7, $8, $9, $3 FROM up
)
SELECT scope, not_before, updated_at FROM up;

-- name: ScopeDeferralGet
SELECT scope, not_before, updated_at FROM scope_deferrals WHERE scope = $1;

-- name: ScopeDeferralExtensionList
SELECT id, scope, offered_not_before, resulting_not_before, retry_after_raw, source,
       clamped, job_id, recording_id, reason, at
FROM scope_deferral_extensions
WHERE scope = $1
ORDER BY id;

-- name: RetentionPurge
SELECT recordings_deleted, events_deleted FROM ledger_retention_purge($1, $2, $3, $4);
