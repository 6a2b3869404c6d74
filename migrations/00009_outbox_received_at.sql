-- The receipt time of each outbox row's recording, stored on the row when
-- it is committed, so that a delivery measures receipt -> CRM (the
-- callscribe_receipt_to_crm_seconds histogram) from the one read it makes
-- of its row instead of reading the action set and the recording again.
-- Rows committed before this migration that can still be delivered
-- (pending, or dead and retryable) get their recording's; NULL: not
-- stored (the dispatcher then asks the ledger).

-- +goose Up
-- +goose StatementBegin
ALTER TABLE outbox ADD COLUMN received_at timestamptz;
UPDATE outbox o SET received_at = r.created_at
FROM action_sets s JOIN recordings r ON r.id = s.recording_id
WHERE s.id = o.action_set_id AND o.state <> 'delivered';
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE outbox DROP COLUMN received_at;
-- +goose StatementEnd
