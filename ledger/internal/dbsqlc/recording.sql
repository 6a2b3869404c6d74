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

-- name: RecordingTransitionMany :many
-- RecordingTransition for many recordings in one statement (a group
-- commit's moves, ledger.Queue.Merged): item i from element i of every
-- array, each its own compare-and-set on (id, from_state) with its event.
-- A row per item that moved, with ord, its place (from 1) in the arrays;
-- an item without one did not move. The ids are distinct (the caller's
-- merge keeps a second move of one recording out).
WITH u AS (
    SELECT s.i AS ord, (@ids::uuid[])[s.i] AS id, (@from_states::text[])[s.i] AS from_state,
           (@to_states::text[])[s.i] AS to_state, (@attempt_incs::integer[])[s.i] AS attempt_inc,
           (@ats::timestamptz[])[s.i] AS at, (@providers::text[])[s.i] AS provider,
           (@provider_ids::text[])[s.i] AS provider_id, (@not_befores::timestamptz[])[s.i] AS not_before,
           (@deadlines::timestamptz[])[s.i] AS deadline, (@reasons::text[])[s.i] AS reason,
           (@response_classes::text[])[s.i] AS response_class, (@retry_after_raws::text[])[s.i] AS retry_after_raw,
           (@details::jsonb[])[s.i] AS detail
    FROM generate_subscripts(@ids::uuid[], 1) AS s(i)
), upd AS (
    UPDATE recordings
    SET state = u.to_state,
        attempt = recordings.attempt + u.attempt_inc,
        updated_at = u.at,
        last_event_seq = recordings.last_event_seq + 1,
        provider = COALESCE(u.provider, recordings.provider),
        provider_id = COALESCE(u.provider_id, recordings.provider_id),
        not_before = u.not_before,
        deadline = COALESCE(u.deadline, recordings.deadline)
    FROM u
    -- ANY: the rows by their key (a generic plan expects a thousand items
    -- from generate_subscripts and would hash the whole table)
    WHERE recordings.id = ANY(@ids::uuid[]) AND recordings.id = u.id AND recordings.state = u.from_state
    RETURNING u.ord, u.from_state AS prior_state, u.at AS event_at, u.reason, u.response_class, u.retry_after_raw, u.detail,
              recordings.id, recordings.tenant_id, recordings.call_id, recordings.audio_sha256, recordings.business_key,
              recordings.state, recordings.attempt, recordings.lane, recordings.audio_uri, recordings.audio_bytes,
              recordings.deadline, recordings.created_at, recordings.updated_at, recordings.last_event_seq,
              recordings.provider, recordings.provider_id, recordings.model, recordings.language, recordings.not_before,
              recordings.started_at, recordings.audio_duration_ms
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at,
                                  reason, response_class, retry_after_raw, detail)
    SELECT upd.id, upd.last_event_seq, upd.prior_state, upd.state, upd.attempt, upd.event_at,
           upd.reason, upd.response_class, upd.retry_after_raw, upd.detail
    FROM upd
)
SELECT upd.ord, upd.id, upd.tenant_id, upd.call_id, upd.audio_sha256, upd.business_key, upd.state, upd.attempt, upd.lane,
       upd.audio_uri, upd.audio_bytes, upd.deadline, upd.created_at, upd.updated_at, upd.last_event_seq, upd.provider,
       upd.provider_id, upd.model, upd.language, upd.not_before, upd.started_at, upd.audio_duration_ms
FROM upd;

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

-- name: RecordingAdvanceMany :many
-- RecordingAdvance for many recordings in one statement (a group commit's
-- moves of transcripts, ledger.Queue.Merged): item i from element i of the
-- item arrays, each its own compare-and-set on (id, from_state); its steps
-- are the elements of the step arrays whose step_items is i, in order
-- (back and attempt_back as RecordingAdvance's seq_backs and
-- attempt_backs); its transcript, if any, the elements of the tr_ arrays
-- whose tr_items is i. A row per item that moved, with ord, its place
-- (from 1); an item without one did not move. The ids are distinct (the
-- caller's merge keeps a second move of one recording out). The database
-- checks each recording's steps at the statement's end (migration 00022).
WITH u AS (
    SELECT s.i AS ord, (@ids::uuid[])[s.i] AS id, (@from_states::text[])[s.i] AS from_state,
           (@to_states::text[])[s.i] AS to_state, (@attempt_incs::integer[])[s.i] AS attempt_inc,
           (@step_counts::integer[])[s.i] AS step_count, (@ats::timestamptz[])[s.i] AS at,
           (@provider_ids::text[])[s.i] AS provider_id
    FROM generate_subscripts(@ids::uuid[], 1) AS s(i)
), steps AS (
    SELECT (@step_items::integer[])[s.i] AS item, (@seq_backs::integer[])[s.i] AS back,
           (@attempt_backs::integer[])[s.i] AS attempt_back, (@prior_states::text[])[s.i] AS prior_state,
           (@new_states::text[])[s.i] AS new_state, (@reasons::text[])[s.i] AS reason,
           (@response_classes::text[])[s.i] AS response_class, (@details::jsonb[])[s.i] AS detail
    FROM generate_subscripts(@step_items::integer[], 1) AS s(i)
), trs AS (
    SELECT (@tr_items::integer[])[s.i] AS item, (@tr_providers::text[])[s.i] AS provider,
           (@tr_vendor_ids::text[])[s.i] AS vendor_id, (@tr_texts::text[])[s.i] AS text,
           (@tr_languages::text[])[s.i] AS language, (@tr_confidences::double precision[])[s.i] AS confidence,
           (@tr_duration_seconds::double precision[])[s.i] AS duration_seconds, (@tr_segments::jsonb[])[s.i] AS segments
    FROM generate_subscripts(@tr_items::integer[], 1) AS s(i)
), upd AS (
    UPDATE recordings
    SET state = u.to_state,
        attempt = recordings.attempt + u.attempt_inc,
        updated_at = u.at,
        last_event_seq = recordings.last_event_seq + u.step_count,
        provider_id = COALESCE(u.provider_id, recordings.provider_id),
        not_before = NULL
    FROM u
    -- ANY: the rows by their key (as RecordingTransitionMany)
    WHERE recordings.id = ANY(@ids::uuid[]) AND recordings.id = u.id AND recordings.state = u.from_state
    RETURNING u.ord, u.at AS event_at,
              recordings.id, recordings.tenant_id, recordings.call_id, recordings.audio_sha256, recordings.business_key,
              recordings.state, recordings.attempt, recordings.lane, recordings.audio_uri, recordings.audio_bytes,
              recordings.deadline, recordings.created_at, recordings.updated_at, recordings.last_event_seq,
              recordings.provider, recordings.provider_id, recordings.model, recordings.language, recordings.not_before,
              recordings.started_at, recordings.audio_duration_ms
), ev AS (
    INSERT INTO recording_events (recording_id, seq, prior_state, new_state, attempt, at,
                                  reason, response_class, detail)
    SELECT upd.id, upd.last_event_seq - steps.back, steps.prior_state, steps.new_state, upd.attempt - steps.attempt_back,
           upd.event_at, steps.reason, steps.response_class, steps.detail
    FROM upd JOIN steps ON steps.item = upd.ord
), tr AS (
    INSERT INTO transcripts (recording_id, provider, provider_id, text, language, confidence,
                             duration_seconds, segments, created_at)
    SELECT upd.id, trs.provider, trs.vendor_id, trs.text, trs.language, trs.confidence,
           trs.duration_seconds, trs.segments, upd.event_at
    FROM upd JOIN trs ON trs.item = upd.ord
)
SELECT upd.ord, upd.id, upd.tenant_id, upd.call_id, upd.audio_sha256, upd.business_key, upd.state, upd.attempt, upd.lane,
       upd.audio_uri, upd.audio_bytes, upd.deadline, upd.created_at, upd.updated_at, upd.last_event_seq, upd.provider,
       upd.provider_id, upd.model, upd.language, upd.not_before, upd.started_at, upd.audio_duration_ms
FROM upd;

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
