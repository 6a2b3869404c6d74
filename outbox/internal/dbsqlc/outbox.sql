-- Outbox rows: one delivery per committed action set and target.

-- name: OutboxInsert :one
-- received_at is the recording's receipt time (NULL: unknown).
INSERT INTO outbox (action_set_id, target, scope, idempotency_key, created_at, updated_at, deadline, received_at)
VALUES (@action_set_id, @target, @scope, @idempotency_key, @at, @at, @deadline, sqlc.narg(received_at)::timestamptz)
RETURNING id;

-- name: OutboxGet :one
SELECT o.id, o.action_set_id, o.target, o.scope, o.idempotency_key, o.state, o.attempts, o.crm_id, o.last_class,
       o.not_before, o.created_at, o.updated_at, o.deadline, s.tenant_id, s.call_id
FROM outbox o JOIN action_sets s ON s.id = o.action_set_id
WHERE o.id = @id;

-- name: OutboxDeliveryGet :one
-- What a delivery try reads, in one statement: the row, its action set, and
-- its recording's receipt time (NULL: not stored with the row).
SELECT o.id, o.action_set_id, o.target, o.scope, o.idempotency_key, o.state, o.attempts, o.crm_id, o.last_class,
       o.not_before, o.created_at, o.updated_at, o.deadline, o.received_at,
       s.recording_id, s.tenant_id, s.call_id, s.action_version, s.recording_sha256, s.actions, s.committed_at
FROM outbox o JOIN action_sets s ON s.id = o.action_set_id
WHERE o.id = @id;

-- name: OutboxList :many
SELECT o.id, o.action_set_id, o.target, o.scope, o.idempotency_key, o.state, o.attempts, o.crm_id, o.last_class,
       o.not_before, o.created_at, o.updated_at, o.deadline, s.tenant_id, s.call_id
FROM outbox o JOIN action_sets s ON s.id = o.action_set_id
WHERE (@state::text = '' OR o.state = @state::text)
ORDER BY o.id
LIMIT @max_rows::bigint;

-- name: OutboxTry :one
-- Records one more try before the CRM is called. No row: the row is no
-- longer pending.
UPDATE outbox SET attempts = attempts + 1, updated_at = @at
WHERE id = @id AND state = 'pending'
RETURNING attempts;

-- name: OutboxSettle :one
-- Moves a row from from_state to state with the event that records the try.
-- last_class is the answer's class, kept on the row and the event, unless
-- row_class (empty: last_class) says otherwise for the row (a try whose answer
-- leaves no time before the deadline: the event keeps the CRM's class, the
-- row says deadline). A deadline given replaces the row's (an operator's
-- retry); NULL keeps it. gauge_names and gauge_values (same length, names
-- unique and sorted, so that concurrent settles lock the counters in one
-- order; NULL: none) set the CRM's usage gauges in the same statement,
-- whether or not the row moved. No row: the row was not in from_state
-- (settled meanwhile).
WITH gauges AS (
    INSERT INTO counters (name, value)
    SELECT unnest(@gauge_names::text[]), unnest(@gauge_values::bigint[])
    ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value
), upd AS (
    UPDATE outbox
    SET state = @state::text, crm_id = COALESCE(NULLIF(@crm_id::text, ''), crm_id),
        last_class = COALESCE(NULLIF(@row_class::text, ''), @last_class::text),
        updated_at = @at::timestamptz, not_before = sqlc.narg(not_before)::timestamptz,
        deadline = COALESCE(sqlc.narg(deadline)::timestamptz, deadline)
    WHERE outbox.id = @id AND outbox.state = @from_state::text
    RETURNING outbox.id, outbox.attempts
)
INSERT INTO outbox_events (outbox_id, attempt, at, prior_state, new_state, outcome, response_class, http_status, crm_id,
                           retry_after_raw, reason)
SELECT upd.id, upd.attempts, @at::timestamptz, @from_state::text, @state::text, @outcome::text, @last_class::text,
       @http_status::integer, @crm_id::text, sqlc.narg(retry_after_raw)::text, @reason::text
FROM upd
RETURNING outbox_id;

-- name: OutboxTryMany :many
-- OutboxTry for many rows in one statement (a group commit's tries,
-- ledger.Queue.Merged): row i from element i of both arrays. A row per try
-- recorded, with ord, its place (from 1) in the arrays; a row without one
-- is no longer pending. The ids are distinct.
UPDATE outbox SET attempts = outbox.attempts + 1, updated_at = u.at
FROM (SELECT s.i AS ord, (@ids::bigint[])[s.i] AS id, (@ats::timestamptz[])[s.i] AS at
      FROM generate_subscripts(@ids::bigint[], 1) AS s(i)) AS u
-- ANY: the rows by their key (a generic plan expects a thousand items
-- from generate_subscripts and would hash the whole table)
WHERE outbox.id = ANY(@ids::bigint[]) AND outbox.id = u.id AND outbox.state = 'pending'
RETURNING u.ord, outbox.attempts;

-- name: OutboxSettleMany :many
-- OutboxSettle without gauges for many rows in one statement (a group
-- commit's settlements, ledger.Queue.Merged): row i from element i of every
-- array. A row per row settled, with ord, its place (from 1) in the arrays;
-- a row without one was not in its from_state. The ids are distinct.
WITH u AS (
    SELECT s.i AS ord, (@ids::bigint[])[s.i] AS id, (@from_states::text[])[s.i] AS from_state,
           (@states::text[])[s.i] AS state, (@crm_ids::text[])[s.i] AS crm_id, (@row_classes::text[])[s.i] AS row_class,
           (@last_classes::text[])[s.i] AS last_class, (@ats::timestamptz[])[s.i] AS at,
           (@not_befores::timestamptz[])[s.i] AS not_before, (@deadlines::timestamptz[])[s.i] AS deadline,
           (@outcomes::text[])[s.i] AS outcome, (@http_statuses::integer[])[s.i] AS http_status,
           (@retry_after_raws::text[])[s.i] AS retry_after_raw, (@reasons::text[])[s.i] AS reason
    FROM generate_subscripts(@ids::bigint[], 1) AS s(i)
), upd AS (
    UPDATE outbox
    SET state = u.state, crm_id = COALESCE(NULLIF(u.crm_id, ''), outbox.crm_id),
        last_class = COALESCE(NULLIF(u.row_class, ''), u.last_class),
        updated_at = u.at, not_before = u.not_before,
        deadline = COALESCE(u.deadline, outbox.deadline)
    FROM u
    WHERE outbox.id = ANY(@ids::bigint[]) AND outbox.id = u.id AND outbox.state = u.from_state -- ANY: as OutboxTryMany
    RETURNING u.ord, outbox.id, outbox.attempts, u.at, u.from_state, u.state, u.outcome, u.last_class, u.http_status,
              u.crm_id, u.retry_after_raw, u.reason
), ev AS (
    INSERT INTO outbox_events (outbox_id, attempt, at, prior_state, new_state, outcome, response_class, http_status, crm_id,
                               retry_after_raw, reason)
    SELECT upd.id, upd.attempts, upd.at, upd.from_state, upd.state, upd.outcome, upd.last_class,
           upd.http_status, upd.crm_id, upd.retry_after_raw, upd.reason
    FROM upd
)
SELECT upd.ord FROM upd;

-- name: OutboxOverdue :many
-- Pending rows whose deadline is at or before cutoff, most overdue first.
SELECT id FROM outbox
WHERE state = 'pending' AND deadline <= @cutoff::timestamptz
ORDER BY deadline, id
LIMIT @max_rows::bigint;

-- name: OutboxOldestPending :one
-- The oldest pending row's commit time and how many rows are pending. No
-- row: none is pending.
SELECT created_at, count(*) OVER () AS pending
FROM outbox WHERE state = 'pending'
ORDER BY created_at
LIMIT 1;

-- name: OutboxCountByState :many
SELECT state, count(*) AS deliveries FROM outbox GROUP BY state ORDER BY state;

-- name: OutboxDepths :one
-- Pending and dead rows, and the age in seconds at @at of the oldest
-- pending row (0 when none is pending).
SELECT count(*) FILTER (WHERE state = 'pending')::bigint AS pending,
       count(*) FILTER (WHERE state = 'dead')::bigint AS dead,
       COALESCE(date_part('epoch', sqlc.arg(at)::timestamptz - min(created_at) FILTER (WHERE state = 'pending')), 0)::float8 AS oldest_pending_seconds
FROM outbox
WHERE state IN ('pending', 'dead');
