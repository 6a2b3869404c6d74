package outbox

// The outbox's SQL, named noun-then-verb.
const (
	qActionSetInsert = `
INSERT INTO action_sets (recording_id, tenant_id, call_id, action_version, recording_sha256, actions, committed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT ON CONSTRAINT action_sets_version DO NOTHING
RETURNING id`

	qActionSetVersionNext = `
SELECT (SELECT count(*) FROM action_sets WHERE tenant_id = $1 AND call_id = $2 AND recording_id <> $3)
     + (SELECT count(*) FROM recording_events WHERE recording_id = $3 AND new_state = 'validated' AND prior_state <> 'validated')`

	qActionSetGet = `
SELECT id, recording_id, tenant_id, call_id, action_version, recording_sha256, actions, committed_at
FROM action_sets WHERE id = $1`

	qActionSetGetByVersion = `
SELECT id, recording_id, tenant_id, call_id, action_version, recording_sha256, actions, committed_at
FROM action_sets WHERE tenant_id = $1 AND call_id = $2 AND action_version = $3`

	qOutboxInsert = `
INSERT INTO outbox (action_set_id, target, scope, idempotency_key, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $5)
RETURNING id`

	qOutboxGet = `
SELECT o.id, o.action_set_id, o.target, o.scope, o.idempotency_key, o.state, o.attempts, o.crm_id, o.last_class,
       o.not_before, o.created_at, o.updated_at, s.tenant_id, s.call_id
FROM outbox o JOIN action_sets s ON s.id = o.action_set_id
WHERE o.id = $1`

	qOutboxList = `
SELECT o.id, o.action_set_id, o.target, o.scope, o.idempotency_key, o.state, o.attempts, o.crm_id, o.last_class,
       o.not_before, o.created_at, o.updated_at, s.tenant_id, s.call_id
FROM outbox o JOIN action_sets s ON s.id = o.action_set_id
WHERE ($1 = '' OR o.state = $1)
ORDER BY o.id
LIMIT $2`

	// qOutboxTry records one more try before the CRM is called.
	qOutboxTry = `
UPDATE outbox SET attempts = attempts + 1, updated_at = $2
WHERE id = $1 AND state = 'pending'
RETURNING attempts`

	qOutboxSettle = `
WITH upd AS (
    UPDATE outbox SET state = $2, crm_id = COALESCE(NULLIF($3, ''), crm_id), last_class = $4, updated_at = $5, not_before = $6
    WHERE id = $1 AND state = $7
    RETURNING id, attempts
)
INSERT INTO outbox_events (outbox_id, attempt, at, prior_state, new_state, outcome, response_class, http_status, crm_id,
                           retry_after_raw, reason)
SELECT id, attempts, $5, $7, $2, $8, $4, $9, $3, $10, $11 FROM upd
RETURNING outbox_id`

	qOutboxEventList = `
SELECT attempt, at, prior_state, new_state, outcome, response_class, http_status, crm_id, retry_after_raw, reason
FROM outbox_events WHERE outbox_id = $1 ORDER BY id`

	qActionSetListByRecording = `
SELECT id, recording_id, tenant_id, call_id, action_version, recording_sha256, actions, committed_at
FROM action_sets WHERE recording_id = $1 ORDER BY action_version`

	// qOutboxEventReplay records a replay delivery on the set's outbox
	// rows: an audit event that changes no delivery state.
	qOutboxEventReplay = `
INSERT INTO outbox_events (outbox_id, attempt, at, prior_state, new_state, outcome, response_class, http_status, crm_id,
                           retry_after_raw, reason)
SELECT id, attempts, $2, state, state, $3, $4, $5, $6, NULL, $7 FROM outbox WHERE action_set_id = $1`

	qAuditCounts = `
SELECT (SELECT count(*) FROM recording_events), (SELECT count(*) FROM outbox_events), (SELECT count(*) FROM action_sets)`

	qCounterAdd = `
INSERT INTO counters (name, value) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET value = counters.value + EXCLUDED.value`

	qGaugeSet = `
INSERT INTO counters (name, value) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`

	qCounterList = `SELECT name, value FROM counters ORDER BY name`

	qCounterGet = `SELECT coalesce((SELECT value FROM counters WHERE name = $1), 0)`
)
