-- recording_guard is called on UPDATE only for a row that may break its
-- rule.
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
-- A recording's way through the pipeline called recording_guard twice: its
-- submission (one step) and its advance to committed (several). Identity,
-- a sequence that moves backward and updated_at are about the row itself
-- and are in the condition. A change of state needs the function when it
-- appends no event (it raises) or exactly one: that step is checked
-- against recording_state_edges, a table, which a condition cannot read.
-- A move of several steps was never checked here: recording_event_present
-- walks its events at commit, and still does. DELETE (the retention purge)
-- calls the function always, as before, through a trigger of its own.

-- +goose Up
-- +goose StatementBegin
DROP TRIGGER recording_guard ON recordings;
CREATE TRIGGER recording_guard BEFORE DELETE ON recordings
    FOR EACH ROW EXECUTE FUNCTION recording_guard();
CREATE TRIGGER recording_update_guard BEFORE UPDATE ON recordings FOR EACH ROW
    WHEN (NEW.id <> OLD.id OR NEW.tenant_id <> OLD.tenant_id OR NEW.call_id <> OLD.call_id
          OR NEW.audio_sha256 <> OLD.audio_sha256 OR NEW.created_at <> OLD.created_at
          OR NEW.last_event_seq < OLD.last_event_seq
          OR (NEW.updated_at IS DISTINCT FROM OLD.updated_at
              AND (NEW.last_event_seq = OLD.last_event_seq OR NEW.updated_at < OLD.updated_at))
          OR (NEW.state IS DISTINCT FROM OLD.state AND NEW.last_event_seq <= OLD.last_event_seq + 1))
    EXECUTE FUNCTION recording_guard();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER recording_update_guard ON recordings;
DROP TRIGGER recording_guard ON recordings;
CREATE TRIGGER recording_guard BEFORE UPDATE OR DELETE ON recordings
    FOR EACH ROW EXECUTE FUNCTION recording_guard();
-- +goose StatementEnd
