-- The outbox row's guard is called only by an UPDATE that sets a column it
-- guards.
--
-- outbox_guard (migration 00003) refuses a state change the delivery
-- state machine does not allow (CS001) and a changed idempotency_key or
-- action_set_id (CS002). It was called by every UPDATE of the table,
-- among them each delivery's try (attempts and updated_at, before the CRM
-- is called), which can break neither rule: a plpgsql call for nothing,
-- once a recording. A trigger declared UPDATE OF those three columns is
-- called when the statement's SET names one of them, whatever the value,
-- which every statement that could change one must: the same statements
-- are refused as before (TestOutboxGuardRefusesExactlyTheBrokenRule, with
-- the columns a statement names drawn too). No other trigger of the table
-- writes them.

-- +goose Up
-- +goose StatementBegin
DROP TRIGGER outbox_guard ON outbox;
CREATE TRIGGER outbox_guard BEFORE UPDATE OF state, idempotency_key, action_set_id ON outbox
    FOR EACH ROW EXECUTE FUNCTION outbox_guard();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER outbox_guard ON outbox;
CREATE TRIGGER outbox_guard BEFORE UPDATE ON outbox
    FOR EACH ROW EXECUTE FUNCTION outbox_guard();
-- +goose StatementEnd
