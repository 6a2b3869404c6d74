-- Every delivery has a deadline: an outbox row still pending at its
-- deadline goes to dead (by its crm_deliver job, or by the outbox's sweep
-- when the job is gone) instead of waiting on a throttling CRM forever.
-- The deadline is fixed when the row is committed (the commit time plus
-- the target's delivery_deadline, 24h by default) and renewed only by an
-- operator's `outbox retry`. Rows committed before this migration get
-- created_at + 24h, the default.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE outbox ADD COLUMN deadline timestamptz;
UPDATE outbox SET deadline = created_at + interval '24 hours';
ALTER TABLE outbox ALTER COLUMN deadline SET NOT NULL;

-- The sweep's question: which pending rows are past their deadline.
CREATE INDEX outbox_pending_deadline ON outbox (deadline) WHERE state = 'pending';
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP INDEX outbox_pending_deadline;
ALTER TABLE outbox DROP COLUMN deadline;
-- +goose StatementEnd
