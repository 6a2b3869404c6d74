-- Replay runs, their deliveries and tries (migration 00016).

-- name: ReplayRunInsert :one
INSERT INTO replay_runs (target, scope, tenant_id, recording_state, window_from, window_to, started_by, max_rate,
                         delivery_deadline, created_at, updated_at)
VALUES (@target, @scope, @tenant_id, @recording_state, @window_from, @window_to, @started_by, @max_rate,
        make_interval(secs => @deadline_seconds::double precision), @at, @at)
RETURNING id;

-- name: ReplayRunGet :one
SELECT id, target, scope, tenant_id, recording_state, window_from, window_to, started_by, max_rate,
       extract(epoch FROM delivery_deadline)::double precision AS deadline_seconds, state,
       cursor_created_at, cursor_id, enumerated, redriven, reason, created_at, updated_at, finished_at
FROM replay_runs WHERE id = @id;

-- name: ReplayRunList :many
-- The newest runs first; active_only: those still enumerating or running.
SELECT id FROM replay_runs
WHERE NOT @active_only::boolean OR state IN ('enumerating', 'running')
ORDER BY id DESC
LIMIT @max_rows::bigint;

-- name: ReplayRunAdvance :one
-- Moves an enumerating run's cursor past one chunk of n recordings, in the
-- chunk's transaction, counting the redriven of them the chunk re-drove
-- itself; last: the chunk was the window's last, and the run
-- goes on to running. The cursor must still be where the chunk began
-- (prev_id; NULL: the start): a second process enumerating the same run
-- loses the race and writes nothing. No row: lost, or the run is no longer
-- enumerating.
UPDATE replay_runs
SET cursor_created_at = sqlc.narg(next_created_at)::timestamptz, cursor_id = sqlc.narg(next_id)::uuid,
    enumerated = enumerated + @n::bigint, redriven = redriven + @redriven::bigint,
    state = CASE WHEN @last::boolean THEN 'running' ELSE state END,
    updated_at = @at
WHERE id = @id AND state = 'enumerating' AND cursor_id IS NOT DISTINCT FROM sqlc.narg(prev_id)::uuid
RETURNING state;

-- name: ReplayRunLock :one
-- The run's state, its row locked until the transaction ends.
SELECT state FROM replay_runs WHERE id = @id FOR UPDATE;

-- name: ReplayRunRecordingDone :exec
UPDATE replay_runs SET redriven = redriven + 1, updated_at = @at WHERE id = @id;

-- name: ReplayRunFinish :one
-- Ends a running run whose recordings are all re-driven (redriven) and whose
-- deliveries are all settled. No row: not yet (or not running).
UPDATE replay_runs SET state = 'done', finished_at = @at, updated_at = @at
WHERE id = @id AND state = 'running' AND redriven >= enumerated
  AND NOT EXISTS (SELECT 1 FROM replay_deliveries d WHERE d.run_id = @id AND d.state = 'pending')
RETURNING id;

-- name: ReplayRunCancel :one
-- Cancels an active run and its pending deliveries. No row: the run was
-- not active.
WITH run AS (
    UPDATE replay_runs SET state = 'cancelled', reason = @reason, finished_at = @at, updated_at = @at
    WHERE id = @id AND state IN ('enumerating', 'running')
    RETURNING id
), d AS (
    UPDATE replay_deliveries SET state = 'cancelled', reason = @reason, updated_at = @at
    WHERE run_id = (SELECT id FROM run) AND state = 'pending'
    RETURNING 1
)
SELECT run.id, (SELECT count(*) FROM d)::bigint AS deliveries FROM run;

-- name: ReplayRateTake :one
-- The run's rate ceiling (GCRA, no burst): takes the next send slot when
-- it is due (took; slot is its instant) or says when it will be (wait_ms).
WITH cur AS (
    SELECT r.id, greatest(coalesce(r.rate_tat, clock_timestamp()), clock_timestamp()) AS due,
           clock_timestamp() AS now, r.max_rate
    FROM replay_runs r WHERE r.id = @id FOR UPDATE
), upd AS (
    UPDATE replay_runs r SET rate_tat = cur.due + make_interval(secs => 1.0 / cur.max_rate)
    FROM cur WHERE r.id = cur.id AND cur.due <= cur.now AND cur.max_rate > 0
    RETURNING cur.due
)
SELECT (SELECT count(*) FROM upd) > 0 AS took, coalesce((SELECT due FROM upd), cur.due)::timestamptz AS slot,
       greatest(extract(epoch FROM cur.due - cur.now) * 1000, 0)::double precision AS wait_ms
FROM cur;

-- name: ActionSetIDsOfRecordings :many
SELECT id FROM action_sets WHERE recording_id = ANY (@recording_ids::uuid[]) ORDER BY id;

-- name: ReplayDeliveryInsertMany :many
-- One delivery per set not yet in the run; returns the sets added.
INSERT INTO replay_deliveries (run_id, action_set_id, deadline, created_at, updated_at)
SELECT @run_id, s, @deadline, @at, @at FROM unnest(@set_ids::bigint[]) AS s
ON CONFLICT (run_id, action_set_id) DO NOTHING
RETURNING action_set_id;

-- name: ReplayDeliveryGet :one
-- What a replay try reads: the delivery, its run and its action set.
SELECT d.run_id, d.action_set_id, d.state, d.attempts, d.last_class, d.not_before, d.deadline, d.created_at,
       r.target, r.scope, r.state AS run_state, r.max_rate,
       s.recording_id, s.tenant_id, s.call_id, s.action_version, s.recording_sha256, s.actions, s.committed_at
FROM replay_deliveries d
JOIN replay_runs r ON r.id = d.run_id
JOIN action_sets s ON s.id = d.action_set_id
WHERE d.run_id = @run_id AND d.action_set_id = @action_set_id;

-- name: ReplayTry :one
-- Counts one more try of a pending delivery and records it, before the CRM
-- is called. No row: no longer pending.
WITH d AS (
    UPDATE replay_deliveries rd SET attempts = rd.attempts + 1, updated_at = @at
    WHERE rd.run_id = @run_id AND rd.action_set_id = @action_set_id AND rd.state = 'pending'
    RETURNING rd.run_id, rd.action_set_id, rd.attempts
)
INSERT INTO replay_tries (run_id, action_set_id, attempt, scope, admitted_seq, admitted_at, rate_slot, sent_at)
SELECT d.run_id, d.action_set_id, d.attempts, @scope, @admitted_seq, @admitted_at, sqlc.narg(rate_slot)::timestamptz, @at
FROM d
RETURNING attempt;

-- name: ReplayTryReadmit :exec
-- The recheck of a try's aged admission: sent, the try goes on the new
-- admission; refused, it is withdrawn unsent (not a send, not a try).
UPDATE replay_tries
SET admitted_seq = CASE WHEN @sent::boolean THEN @admitted_seq::bigint ELSE admitted_seq END,
    admitted_at = CASE WHEN @sent::boolean THEN @admitted_at::timestamptz ELSE admitted_at END,
    outcome = CASE WHEN @sent::boolean THEN outcome ELSE 'withdrawn' END,
    answered_at = CASE WHEN @sent::boolean THEN answered_at ELSE @at::timestamptz END
WHERE run_id = @run_id AND action_set_id = @action_set_id AND attempt = @attempt;

-- name: ReplaySettle :one
-- Settles a try: the delivery's new state (pending: back in line until
-- not_before), its counters, the try's answer and, when the delivery ends,
-- an audit event on the set's outbox rows (no delivery state of theirs
-- changes). No row: the delivery was no longer pending.
WITH upd AS (
    UPDATE replay_deliveries rd
    SET state = @state::text, outcome = @outcome::text, last_class = @last_class::text,
        crm_id = COALESCE(NULLIF(@crm_id::text, ''), rd.crm_id), reason = @reason::text,
        not_before = sqlc.narg(not_before)::timestamptz,
        throttled = rd.throttled + @throttled::integer, transient = rd.transient + @transient::integer, updated_at = @at
    WHERE rd.run_id = @run_id AND rd.action_set_id = @action_set_id AND rd.state = 'pending'
    RETURNING rd.run_id, rd.action_set_id, rd.attempts
), try AS (
    UPDATE replay_tries t SET answered_at = @at, outcome = @outcome::text, response_class = @last_class::text,
        http_status = @http_status::integer
    FROM upd WHERE @answered::boolean AND t.run_id = upd.run_id AND t.action_set_id = upd.action_set_id
      AND t.attempt = upd.attempts
    RETURNING 1
), ev AS (
    INSERT INTO outbox_events (outbox_id, attempt, at, prior_state, new_state, outcome, response_class, http_status, crm_id,
                               retry_after_raw, reason)
    SELECT o.id, o.attempts, @at::timestamptz, o.state, o.state, 'replay:' || @outcome::text, @last_class::text,
           @http_status::integer, @crm_id::text, NULL, @audit_reason::text
    FROM outbox o JOIN upd ON o.action_set_id = upd.action_set_id
    WHERE @state::text <> 'pending'
    RETURNING 1
)
SELECT upd.attempts FROM upd;

-- name: ReplayReport :one
-- A run's figures. audit_events: its tries (withdrawn ones too) and the audit events its ended
-- deliveries appended to their sets' outbox rows; new_action_versions:
-- action sets committed since the run began for the calls it replays.
SELECT
    (SELECT count(*) FROM replay_deliveries d WHERE d.run_id = @id)::bigint AS deliveries,
    (SELECT count(*) FROM replay_deliveries d WHERE d.run_id = @id AND d.state = 'pending')::bigint AS pending,
    (SELECT count(*) FROM replay_deliveries d WHERE d.run_id = @id AND d.state = 'delivered' AND d.outcome = 'applied')::bigint AS applied,
    (SELECT count(*) FROM replay_deliveries d WHERE d.run_id = @id AND d.state = 'delivered' AND d.outcome = 'replayed')::bigint AS replayed,
    (SELECT count(*) FROM replay_deliveries d WHERE d.run_id = @id AND d.state = 'dead')::bigint AS dead,
    (SELECT count(*) FROM replay_deliveries d WHERE d.run_id = @id AND d.state = 'cancelled')::bigint AS cancelled,
    (SELECT coalesce(sum(d.throttled), 0) FROM replay_deliveries d WHERE d.run_id = @id)::bigint AS throttled,
    (SELECT coalesce(sum(d.transient), 0) FROM replay_deliveries d WHERE d.run_id = @id)::bigint AS transient,
    (SELECT count(*) FROM replay_tries t WHERE t.run_id = @id AND t.outcome IS DISTINCT FROM 'withdrawn')::bigint AS tries,
    (SELECT count(*) FROM replay_tries t WHERE t.run_id = @id AND t.outcome = 'withdrawn')::bigint AS withdrawn,
    ((SELECT count(*) FROM replay_tries t WHERE t.run_id = @id)
     + (SELECT count(*) FROM replay_deliveries d JOIN outbox o ON o.action_set_id = d.action_set_id
        WHERE d.run_id = @id AND d.state IN ('delivered', 'dead')))::bigint AS audit_events,
    (SELECT count(*) FROM action_sets a
     WHERE a.committed_at >= (SELECT r.created_at FROM replay_runs r WHERE r.id = @id)
       AND EXISTS (SELECT 1 FROM replay_deliveries d JOIN action_sets b ON b.id = d.action_set_id
                   WHERE d.run_id = @id AND b.tenant_id = a.tenant_id AND b.call_id = a.call_id))::bigint AS new_action_versions;

-- name: ReplayTrySends :many
-- A run's tries as sent (not withdrawn): the admission each went on and
-- when it was sent.
SELECT scope, admitted_seq, admitted_at, sent_at, rate_slot FROM replay_tries
WHERE run_id = @run_id AND outcome IS DISTINCT FROM 'withdrawn'
ORDER BY id;

-- name: ReplayDeadList :many
-- A run's dead deliveries with why, for the report.
SELECT d.action_set_id, s.tenant_id, s.call_id, s.action_version, d.last_class, d.reason
FROM replay_deliveries d JOIN action_sets s ON s.id = d.action_set_id
WHERE d.run_id = @run_id AND d.state = 'dead'
ORDER BY d.action_set_id
LIMIT @max_rows::bigint;

-- name: ReplayPendingOf :many
-- The sets of a run's pending deliveries, each locked until the caller's
-- transaction ends so that no try settles it (and its job completes)
-- between this read and the caller's insert of a job for it; one a try is
-- writing right now is skipped: its job is alive.
SELECT action_set_id FROM replay_deliveries WHERE run_id = @run_id AND state = 'pending' ORDER BY action_set_id
FOR UPDATE SKIP LOCKED;

-- name: ReplayOverdue :many
-- Pending deliveries of any run past their deadline by the cutoff, which
-- their jobs should have ended: the sweep ends them.
SELECT d.run_id, d.action_set_id, d.deadline, d.last_class, r.target
FROM replay_deliveries d JOIN replay_runs r ON r.id = d.run_id
WHERE d.state = 'pending' AND d.deadline < @cutoff
ORDER BY d.deadline
LIMIT @max_rows::bigint;
