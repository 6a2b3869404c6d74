-- The append-only history of outbox rows.

-- name: OutboxEventList :many
SELECT attempt, at, prior_state, new_state, outcome, response_class, http_status, crm_id, retry_after_raw, reason
FROM outbox_events WHERE outbox_id = @outbox_id ORDER BY id;

-- name: OutboxAuditCount :one
-- The sizes of the outbox's append-only histories.
SELECT (SELECT count(*) FROM outbox_events) AS outbox_events, (SELECT count(*) FROM action_sets) AS action_sets;

-- name: OutboxEventReplay :exec
-- A replay delivery on the set's outbox rows: an audit event that changes
-- no delivery state.
INSERT INTO outbox_events (outbox_id, attempt, at, prior_state, new_state, outcome, response_class, http_status, crm_id,
                           retry_after_raw, reason)
SELECT o.id, o.attempts, @at::timestamptz, o.state, o.state, @outcome::text, @response_class::text,
       @http_status::integer, @crm_id::text, NULL, @reason::text
FROM outbox o WHERE o.action_set_id = @action_set_id;

-- name: OutboxEventLastOutcome :one
-- The outcome of a row's newest event. No row: it has none.
SELECT outcome FROM outbox_events WHERE outbox_id = @outbox_id ORDER BY id DESC LIMIT 1;

-- name: OutboxEventLastRetry :one
-- When an operator last retried a row. No row: never.
SELECT at FROM outbox_events WHERE outbox_id = @outbox_id AND outcome = 'retry' ORDER BY id DESC LIMIT 1;
