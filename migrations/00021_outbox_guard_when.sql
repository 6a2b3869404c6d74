-- outbox_guard is called only for a row that breaks its rule.
--
-- Every function of the schema pins its search_path (migration 00014), and
-- PostgreSQL sets and restores that setting around every call of such a
-- function: on PostgreSQL 15 that costs about 18 µs a call, several times
-- what a guard's own checks cost. A trigger's WHEN condition is evaluated
-- without calling the function, with no setting changed, and it was
-- parsed, with its names resolved, when the trigger was created, so no
-- session's search_path reaches it. The condition below says when a row
-- may break the guard's rule; for every other row the function, which
-- checks the same rules and raises, would have returned the row
-- unchanged. The function is unchanged, so a row the condition lets
-- through meets every check it met before.
--
-- A delivery called outbox_guard twice (its try and its settle). Its whole
-- rule is about the row itself (an allowed change of state, an immutable
-- identity), so the condition is the rule: the function is called only to
-- raise. Migration 00022 does the same for recording_guard.

-- +goose Up
-- +goose StatementBegin
DROP TRIGGER outbox_guard ON outbox;
CREATE TRIGGER outbox_guard BEFORE UPDATE ON outbox FOR EACH ROW
    WHEN ((NEW.state IS DISTINCT FROM OLD.state AND NOT (
              (OLD.state = 'pending' AND NEW.state IN ('delivered', 'dead')) OR
              (OLD.state = 'dead' AND NEW.state = 'pending')))
          OR NEW.idempotency_key <> OLD.idempotency_key
          OR NEW.action_set_id <> OLD.action_set_id)
    EXECUTE FUNCTION outbox_guard();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER outbox_guard ON outbox;
CREATE TRIGGER outbox_guard BEFORE UPDATE ON outbox
    FOR EACH ROW EXECUTE FUNCTION outbox_guard();
-- +goose StatementEnd
