-- A recording's move is checked by one row trigger at the end of its
-- statement, not by two, one of them again at commit.
--
-- Every move (RecordingTransition, RecordingAdvance, RecordingNote)
-- updated its row under two plpgsql row triggers: recording_guard, before
-- the row was written (identity, sequence, updated_at, a one-step move is
-- an edge), and recording_event_present, a constraint trigger deferred to
-- the commit that read the row again and then its last event (they match;
-- a move of several steps has an event per step, in a chain). Measured
-- with pgbench on one connection, a one-step move and its event in one
-- statement took 127 us with no update guard, 174 us with the two, and
-- 145 us with the one below: the two function calls, the deferred
-- trigger's queue and its reading the row again cost more than the checks.
-- (A statement-level trigger over transition tables was measured too:
-- 185 us; for the one row a group committer's statement moves, the
-- transition tables and the planned query cost more than a row trigger.)
--
-- recording_update_guard, AFTER UPDATE FOR EACH ROW, checks with OLD and
-- NEW, in this order, with the SQLSTATE and message recording_guard and
-- recording_event_present gave:
--
--   CS002  identity columns changed (id, tenant_id, call_id,
--          audio_sha256, created_at); the event sequence moved backward;
--          updated_at moved without a new event, or backward;
--   CS001  the state changed without a new event; a move of one step
--          that is no edge of recording_state_edges; the row's last event
--          missing or not matching its state and attempt; the events of
--          the move not leading from the old state to the new one a step
--          at a time (one lookup for a move of one step, one range scan
--          of the (recording_id, seq) key for several).
--
-- What changes is when: an AFTER row trigger fires at the end of the
-- statement, after every part of a data-modifying WITH, where the event
-- check came at commit before. Every statement callscribe writes appends
-- a move's events in the statement that moves the row, so the check sees
-- what the commit saw. A statement that moves a row and leaves its events
-- to a later statement is refused now, where it was refused at commit. A
-- trigger that raises aborts its statement: nothing the statement wrote is
-- kept.
--
-- A one-step move's event must also leave the old state (prior_state),
-- as every move callscribe writes does; before, only its new state and
-- attempt were compared.
--
-- recording_guard stays for DELETE (the retention purge), unchanged.
-- recording_event_present's function stays, unattached, for Down.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION recording_update_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ev record;
    -- the move's last event (last_seq NULL: none)
    last_seq integer;
    last_prior text;
    last_new text;
    last_attempt integer;
    prev text;
    want integer;
    broken boolean := false;
BEGIN
    IF NEW.id <> OLD.id OR NEW.tenant_id <> OLD.tenant_id OR NEW.call_id <> OLD.call_id
       OR NEW.audio_sha256 <> OLD.audio_sha256 OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'recording % identity columns are immutable', OLD.id USING ERRCODE = 'CS002';
    END IF;
    IF NEW.last_event_seq < OLD.last_event_seq THEN
        RAISE EXCEPTION 'recording % event sequence may not move backward', OLD.id USING ERRCODE = 'CS002';
    END IF;
    -- updated_at decides when a history may be purged: it moves only with
    -- a new event, and never backward.
    IF NEW.updated_at IS DISTINCT FROM OLD.updated_at
       AND (NEW.last_event_seq = OLD.last_event_seq OR NEW.updated_at < OLD.updated_at) THEN
        RAISE EXCEPTION 'recording % updated_at moves only forward and only with a new event', OLD.id
            USING ERRCODE = 'CS002';
    END IF;
    IF NEW.last_event_seq = OLD.last_event_seq THEN
        IF NEW.state IS DISTINCT FROM OLD.state THEN
            RAISE EXCEPTION 'transition of recording % must append one event per step', OLD.id
                USING ERRCODE = 'CS001';
        END IF;
        IF NEW.attempt IS DISTINCT FROM OLD.attempt THEN
            RAISE EXCEPTION 'recording % is in state % (seq %) without a matching event',
                NEW.id, NEW.state, NEW.last_event_seq USING ERRCODE = 'CS001';
        END IF;
        RETURN NULL; -- no move: the last event is the one already checked
    END IF;

    IF NEW.last_event_seq = OLD.last_event_seq + 1 THEN
        IF NEW.state <> OLD.state AND NOT EXISTS (
               SELECT 1 FROM recording_state_edges WHERE from_state = OLD.state AND to_state = NEW.state) THEN
            RAISE EXCEPTION 'illegal transition % -> % for recording %', OLD.state, NEW.state, OLD.id
                USING ERRCODE = 'CS001';
        END IF;
        -- One step: its event, one probe of the (recording_id, seq) key.
        SELECT e.seq, e.prior_state, e.new_state, e.attempt INTO last_seq, last_prior, last_new, last_attempt
          FROM recording_events e
         WHERE e.recording_id = NEW.id AND e.seq = NEW.last_event_seq;
        broken := FOUND AND last_prior IS DISTINCT FROM OLD.state;
    ELSE
        -- Several steps: the events after the old last one, in order, each
        -- leaving the state the one before it entered.
        prev := OLD.state;
        want := OLD.last_event_seq + 1;
        FOR ev IN SELECT e.seq, e.prior_state, e.new_state, e.attempt FROM recording_events e
                  WHERE e.recording_id = NEW.id AND e.seq > OLD.last_event_seq AND e.seq <= NEW.last_event_seq
                  ORDER BY e.seq LOOP
            IF ev.seq <> want OR ev.prior_state IS DISTINCT FROM prev THEN
                broken := true;
            END IF;
            prev := ev.new_state;
            want := want + 1;
            last_seq := ev.seq;
            last_new := ev.new_state;
            last_attempt := ev.attempt;
        END LOOP;
    END IF;
    IF last_seq IS DISTINCT FROM NEW.last_event_seq OR last_new IS DISTINCT FROM NEW.state
       OR last_attempt IS DISTINCT FROM NEW.attempt THEN
        RAISE EXCEPTION 'recording % is in state % (seq %) without a matching event',
            NEW.id, NEW.state, NEW.last_event_seq USING ERRCODE = 'CS001';
    END IF;
    IF broken THEN
        RAISE EXCEPTION 'recording % moved % -> % (seq % -> %) without an event per step',
            NEW.id, OLD.state, NEW.state, OLD.last_event_seq, NEW.last_event_seq USING ERRCODE = 'CS001';
    END IF;
    RETURN NULL;
END
$$;

-- Pinned search_path, as every function of the schema (migration 00014).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION recording_update_guard() SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

DROP TRIGGER recording_event_present ON recordings;
DROP TRIGGER recording_guard ON recordings;
CREATE TRIGGER recording_guard BEFORE DELETE ON recordings
    FOR EACH ROW EXECUTE FUNCTION recording_guard();
CREATE TRIGGER recording_update_guard AFTER UPDATE ON recordings
    FOR EACH ROW EXECUTE FUNCTION recording_update_guard();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER recording_update_guard ON recordings;
DROP TRIGGER recording_guard ON recordings;
CREATE TRIGGER recording_guard BEFORE UPDATE OR DELETE ON recordings
    FOR EACH ROW EXECUTE FUNCTION recording_guard();
CREATE CONSTRAINT TRIGGER recording_event_present AFTER UPDATE ON recordings
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION recording_event_present();
DROP FUNCTION recording_update_guard();
-- +goose StatementEnd
