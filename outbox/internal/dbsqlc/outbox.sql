-- Outbox rows: one delivery per committed action set and target.

-- name: OutboxInsert :one
INSERT INTO outbox (action_set_id, target, scope, idempotency_key, created_at, updated_at)
VALUES (@action_set_id, @target, @scope, @idempotency_key, @at, @at)
RETURNING id;

-- name: OutboxGet :one
SELECT o.id, o.action_set_id, o.target, o.scope, o.idempotency_key, o.state, o.attempts, o.crm_id, o.last_class,
       o.not_before, o.created_at, o.updated_at, s.tenant_id, s.call_id
FROM outbox o JOIN action_sets s ON s.id = o.action_set_id
WHERE o.id = @id;

-- name: OutboxList :many
SELECT o.id, o.action_set_id, o.target, o.scope, o.idempotency_key, o.state, o.attempts, o.crm_id, o.last_class,
       o.not_before, o.created_at, o.updated_at, s.tenant_id, s.call_id
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
-- No row: the row was not in from_state (settled meanwhile).
WITH upd AS (
    UPDATE outbox
    SET state = @state::text, crm_id = COALESCE(NULLIF(@crm_id::text, ''), crm_id), last_class = @last_class::text,
        updated_at = @at::timestamptz, not_before = sqlc.narg(not_before)::timestamptz
    WHERE outbox.id = @id AND outbox.state = @from_state::text
    RETURNING outbox.id, outbox.attempts
)
INSERT INTO outbox_events (outbox_id, attempt, at, prior_state, new_state, outcome, response_class, http_status, crm_id,
                           retry_after_raw, reason)
SELECT upd.id, upd.attempts, @at::timestamptz, @from_state::text, @state::text, @outcome::text, @last_class::text,
       @http_status::integer, @crm_id::text, sqlc.narg(retry_after_raw)::text, @reason::text
FROM upd
RETURNING outbox_id;
