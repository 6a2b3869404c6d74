-- Recordings: one current row per recording. Every write appends its event
-- in the same statement. Recordings are selected whole (*): sqlc expands the
-- columns, so every query below returns the same Recording.

-- name: RecordingLockCall :exec
-- Serialises ingests of one call (until the transaction ends).
SELECT pg_advisory_xact_lock(hashtextextended(@tenant_id::text || ':' || @call_id::text, 7031));

-- name: RecordingGetByKey :one
SELECT * FROM recordings
WHERE tenant_id = @tenant_id AND call_id = @call_id AND audio_sha256 = @audio_sha256;

-- name: RecordingGet :one
SELECT * FROM recordings WHERE id = @id;

-- name: RecordingListDigestsByCall :many
SELECT id, audio_sha256
FROM recordings
WHERE tenant_id = @tenant_id AND call_id = @call_id
ORDER BY created_at, id;

-- name: RecordingInsert :one
WITH ins AS (
    INSERT INTO recordings (id, tenant_id, call_id, audio_sha256, state, attempt, lane,
                            audio_uri, audio_bytes, deadline, created_at, updated_at, last_event_seq,
                            model, language, started_at, audio_duration_ms)
    VALUES (@id, @tenant_id, @call_id, @audio_sha256, 'received', 0, @lane,
            @audio_uri, @audio_bytes, sqlc.narg(deadline), @at, @at, 1,
            @model, @language, sqlc.narg(started_at), sqlc.narg(audio_duration_ms))
    RETURNING *
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at, reason, detail)
    SELECT ins.id, 1, NULL, 'received', 0, @at, @reason::text, @detail::jsonb FROM ins
)
SELECT * FROM ins;

-- name: RecordingLockCalls :exec
-- RecordingLockCall for many calls at once, taken in one order (of the lock
-- keys) so that two batches sharing calls never deadlock.
SELECT pg_advisory_xact_lock(k) FROM (
    SELECT DISTINCT hashtextextended(u.tenant_id || ':' || u.call_id, 7031) AS k
    FROM (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@call_ids::text[]) AS call_id) AS u
    ORDER BY k
) AS locks;

-- name: RecordingListByCalls :many
-- Every recording of the given calls (pairs of tenant_ids[i], call_ids[i]).
SELECT * FROM recordings
WHERE (tenant_id, call_id) IN (SELECT unnest(@tenant_ids::text[]), unnest(@call_ids::text[]))
ORDER BY created_at, id;

-- name: RecordingInsertBatchEligible :one
-- RecordingInsertBatch with every row born eligible (migration 00010): at
-- seq 2, with its two events, received and received → eligible (reason
-- eligible_reason). It returns how many rows it inserted, not the rows:
-- the caller built every column (IngestManyTx), and a chunk's rows back
-- cost the database and the client more than the count.
-- RecordingInsert for many recordings in one statement: row i from element
-- i of every array. A zero deadline or started_at (0001-01-01 UTC) and a
-- zero duration are stored as NULL.
WITH u AS (
    -- Arrays of one length, unnested side by side (set-returning
    -- functions in one select list advance together).
    SELECT unnest(@ids::uuid[]) AS id, unnest(@tenant_ids::text[]) AS tenant_id, unnest(@call_ids::text[]) AS call_id,
           unnest(@audio_sha256s::text[]) AS audio_sha256, unnest(@lanes::text[]) AS lane,
           unnest(@audio_uris::text[]) AS audio_uri, unnest(@audio_bytes::bigint[]) AS audio_bytes,
           unnest(@deadlines::timestamptz[]) AS deadline, unnest(@models::text[]) AS model,
           unnest(@languages::text[]) AS language, unnest(@started_ats::timestamptz[]) AS started_at,
           unnest(@audio_duration_ms::bigint[]) AS audio_duration_ms, unnest(@reasons::text[]) AS reason,
           unnest(@details::text[]) AS detail
), ins AS (
    INSERT INTO recordings (id, tenant_id, call_id, audio_sha256, state, attempt, lane,
                            audio_uri, audio_bytes, deadline, created_at, updated_at, last_event_seq,
                            model, language, started_at, audio_duration_ms)
    SELECT u.id, u.tenant_id, u.call_id, u.audio_sha256, 'eligible', 0, u.lane,
           u.audio_uri, u.audio_bytes, NULLIF(u.deadline, '0001-01-01 00:00:00+00'::timestamptz), @at, @at, 2,
           u.model, u.language, NULLIF(u.started_at, '0001-01-01 00:00:00+00'::timestamptz), NULLIF(u.audio_duration_ms, 0)
    FROM u
    RETURNING 1
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at, reason, detail)
    SELECT u.id, 1, NULL, 'received', 0, @at, u.reason, u.detail::jsonb FROM u
    UNION ALL
    SELECT u.id, 2, 'received', 'eligible', 0, @at, @eligible_reason::text, '{}'::jsonb FROM u
)
SELECT count(*) FROM ins;

-- name: RecordingTransition :one
-- A compare-and-set on (id, state) and the event that records it. No row:
-- the recording is not in from_state (or does not exist).
WITH upd AS (
    UPDATE recordings
    SET state = @to_state::text,
        attempt = attempt + @attempt_inc::integer,
        updated_at = @at::timestamptz,
        last_event_seq = last_event_seq + 1,
        provider = COALESCE(sqlc.narg(provider)::text, provider),
        provider_id = COALESCE(sqlc.narg(provider_id)::text, provider_id),
        not_before = sqlc.narg(not_before)::timestamptz,
        deadline = COALESCE(sqlc.narg(deadline)::timestamptz, deadline)
    WHERE recordings.id = @id AND recordings.state = @from_state::text
    RETURNING *
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at,
                                  reason, response_class, retry_after_raw, detail)
    SELECT upd.id, upd.last_event_seq, @from_state::text, upd.state, upd.attempt, @at::timestamptz,
           @reason::text, @response_class::text, sqlc.narg(retry_after_raw)::text, @detail::jsonb
    FROM upd
)
SELECT * FROM upd;

-- name: RecordingAdvance :one
-- A move of one or more steps in one statement: a compare-and-set on (id,
-- from_state), the row to the last step's state, one event per step
-- (prior_states[i] -> new_states[i], numbered after the row's last), and,
-- with with_transcript, the transcript the first step received. No row: the
-- recording is not in from_state (or does not exist). The database checks
-- the steps' chain at the statement's end (migration 00022).
WITH steps AS (
    -- back: how many events the move appends after this step's;
    -- attempt_back: how many attempts its later steps count.
    SELECT s.back, s.i, (@attempt_backs::integer[])[s.i] AS attempt_back
    FROM unnest(@seq_backs::integer[]) WITH ORDINALITY AS s(back, i)
), upd AS (
    UPDATE recordings
    SET state = @to_state::text,
        attempt = attempt + @attempt_inc::integer,
        updated_at = @at::timestamptz,
        last_event_seq = last_event_seq + cardinality(@prior_states::text[]),
        provider_id = COALESCE(sqlc.narg(provider_id)::text, provider_id),
        not_before = NULL
    WHERE recordings.id = @id AND recordings.state = @from_state::text
    RETURNING *
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at,
                                  reason, response_class, detail)
    SELECT upd.id, upd.last_event_seq - steps.back, (@prior_states::text[])[steps.i],
           (@new_states::text[])[steps.i], upd.attempt - steps.attempt_back,
           @at::timestamptz, (@reasons::text[])[steps.i], (@response_classes::text[])[steps.i], (@details::jsonb[])[steps.i]
    FROM upd, steps
), tr AS (
    INSERT INTO transcripts (recording_id, provider, provider_id, text, language, confidence,
                             duration_seconds, segments, created_at)
    SELECT upd.id, @tr_provider::text, @tr_vendor_id::text, @tr_text::text, @tr_language::text,
           @tr_confidence::double precision, @tr_duration_seconds::double precision, @tr_segments::jsonb, @at::timestamptz
    FROM upd WHERE @with_transcript::boolean
)
SELECT * FROM upd;

-- name: RecordingNote :one
-- An event that keeps the state (prior = new), with the same compare-and-set.
WITH upd AS (
    UPDATE recordings
    SET attempt = attempt + @attempt_inc::integer,
        updated_at = @at::timestamptz,
        last_event_seq = last_event_seq + 1,
        provider = COALESCE(sqlc.narg(provider)::text, provider),
        provider_id = COALESCE(sqlc.narg(provider_id)::text, provider_id)
    WHERE recordings.id = @id AND recordings.state = @state::text
    RETURNING *
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at,
                                  reason, response_class, retry_after_raw, detail)
    SELECT upd.id, upd.last_event_seq, upd.state, upd.state, upd.attempt, @at::timestamptz,
           @reason::text, @response_class::text, sqlc.narg(retry_after_raw)::text, @detail::jsonb
    FROM upd
)
SELECT * FROM upd;

-- name: RecordingStateGet :one
SELECT state FROM recordings WHERE id = @id;

-- name: RecordingList :many
SELECT * FROM recordings
WHERE (@state::text = '' OR state = @state::text)
  AND (@tenant_id::text = '' OR tenant_id = @tenant_id::text)
  AND (sqlc.narg(created_from)::timestamptz IS NULL OR created_at >= sqlc.narg(created_from)::timestamptz)
  AND (sqlc.narg(created_to)::timestamptz IS NULL OR created_at < sqlc.narg(created_to)::timestamptz)
ORDER BY created_at, id
LIMIT @max_rows::bigint;

-- name: RecordingPage :many
-- One page of recordings in (created_at, id) order after a cursor.
SELECT * FROM recordings
WHERE (@state::text = '' OR state = @state::text)
  AND (@tenant_id::text = '' OR tenant_id = @tenant_id::text)
  AND (@lane::text = '' OR lane = @lane::text)
  AND (sqlc.narg(created_from)::timestamptz IS NULL OR created_at >= sqlc.narg(created_from)::timestamptz)
  AND (sqlc.narg(created_to)::timestamptz IS NULL OR created_at < sqlc.narg(created_to)::timestamptz)
  AND (sqlc.narg(after_created)::timestamptz IS NULL
       OR (created_at, id) > (sqlc.narg(after_created)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY created_at, id
LIMIT @max_rows::bigint;

-- name: RecordingListByCall :many
SELECT * FROM recordings WHERE tenant_id = @tenant_id AND call_id = @call_id ORDER BY created_at, id;

-- name: RecordingListOverdue :many
SELECT id FROM recordings
WHERE deadline < @now::timestamptz AND state NOT IN ('committed', 'expired', 'failed')
ORDER BY deadline
LIMIT @max_rows::bigint;

-- name: RecordingCountByState :many
SELECT state, count(*) AS recordings FROM recordings GROUP BY state ORDER BY state;

-- name: RecordingCountByTenantLaneState :many
SELECT tenant_id, lane, state, count(*) AS recordings
FROM recordings GROUP BY tenant_id, lane, state ORDER BY tenant_id, lane, state;

-- name: RecordingOldestWaitingByLane :many
-- Per lane of @lanes, the age in seconds at @at of the oldest recording
-- waiting to be submitted (eligible, or in retry_wait with its not_before
-- passed at @at), 0 when none waits.
SELECT l.lane::text AS lane,
       COALESCE(date_part('epoch', sqlc.arg(at)::timestamptz - min(r.created_at)), 0)::float8 AS age_seconds
FROM unnest(sqlc.arg(lanes)::text[]) AS l (lane)
LEFT JOIN recordings r
       ON r.lane = l.lane
      AND (r.state = 'eligible' OR (r.state = 'retry_wait' AND (r.not_before IS NULL OR r.not_before <= sqlc.arg(at)::timestamptz)))
GROUP BY l.lane;
