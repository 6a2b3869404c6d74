-- recording_events' insert guard is a row trigger called only for an
-- event that breaks its rule.
--
-- Migration 00019 made it a statement trigger over the statement's
-- transition table, so that an ingest chunk of 1,000 recordings and 2,000
-- events called it once, not 2,000 times. But a statement trigger is
-- called for every statement, and the pipeline's statements write one
-- event (a submission) or a few (the advance to committed): two calls of
-- a function with a pinned search_path per recording, which PostgreSQL 15
-- makes cost about 18 µs each in setting changes alone, besides
-- capturing the transition table and its query.
--
-- A row trigger's WHEN condition is evaluated without calling the
-- function, and it was parsed, with its names resolved, when the trigger
-- was created, so no session's search_path reaches it. The condition here
-- is the rule written out: an event is legal when it is a first event (no
-- prior state) entering received at seq 1, or a step of
-- recording_state_edges, or a note (the same state) naming a state of
-- recording_states. A condition cannot read a table, so it lists both,
-- which migrations 00001 and 00002 fixed (their _fixed triggers refuse
-- every change). IS NOT TRUE makes an unknown (a NULL) count as a break.
--
-- Only when the condition says the event breaks the rule is the function
-- called; it checks the rule again against the tables and raises what
-- the statement trigger raised (SQLSTATE CS001, the same messages). A
-- list that missed an edge would only call the function, which lets the
-- event through; a list that named a step that is no edge would let it
-- through unchecked, which TestEventInsertGuardRefusesExactlyTheBrokenRule,
-- drawing every pair of states against the Go state machine (held to the
-- table by TestStateMachineMatchesDatabase), does not allow. A migration
-- that adds an edge or a state adds it here and in migration 00022's
-- condition too.
--
-- recording_event_insert_guard(), the statement trigger's function, is
-- kept for Down.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION recording_event_row_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.prior_state IS NULL THEN
        IF NEW.new_state IS DISTINCT FROM 'received' OR NEW.seq IS DISTINCT FROM 1 THEN
            RAISE EXCEPTION 'first event of recording % must enter received', NEW.recording_id
                USING ERRCODE = 'CS001';
        END IF;
    ELSIF NEW.prior_state IS DISTINCT FROM NEW.new_state THEN
        IF NOT EXISTS (SELECT 1 FROM recording_state_edges g
                        WHERE g.from_state = NEW.prior_state AND g.to_state = NEW.new_state) THEN
            RAISE EXCEPTION 'illegal transition % -> % in event of recording %',
                NEW.prior_state, NEW.new_state, NEW.recording_id USING ERRCODE = 'CS001';
        END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM recording_states s WHERE s.name = NEW.new_state) THEN
        -- A note keeps the state: it must be one.
        RAISE EXCEPTION 'event of recording % names no state: %', NEW.recording_id, NEW.new_state
            USING ERRCODE = 'CS001';
    END IF;
    RETURN NEW;
END
$$;

-- Pinned search_path, as every function of the schema (migration 00014).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION recording_event_row_guard() SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

DROP TRIGGER recording_event_insert_guard ON recording_events;
CREATE TRIGGER recording_event_insert_guard BEFORE INSERT ON recording_events FOR EACH ROW
    WHEN (((NEW.prior_state IS NULL AND NEW.new_state = 'received' AND NEW.seq = 1)
           OR (NEW.prior_state, NEW.new_state) IN (
              ('committed', 'validated'), ('eligible', 'expired'), ('eligible', 'failed'), ('eligible', 'submitted'),
              ('expired', 'eligible'), ('failed', 'eligible'), ('received', 'eligible'), ('received', 'expired'),
              ('retry_wait', 'eligible'), ('retry_wait', 'expired'), ('submitted', 'expired'), ('submitted', 'failed'),
              ('submitted', 'retry_wait'), ('submitted', 'transcribed'), ('transcribed', 'expired'), ('transcribed', 'failed'),
              ('transcribed', 'validated'), ('validated', 'committed'), ('validated', 'expired'))
           OR (NEW.prior_state = NEW.new_state AND NEW.new_state IN (
              'received', 'eligible', 'submitted', 'retry_wait', 'transcribed', 'validated',
              'committed', 'expired', 'failed'))) IS NOT TRUE)
    EXECUTE FUNCTION recording_event_row_guard();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER recording_event_insert_guard ON recording_events;
CREATE TRIGGER recording_event_insert_guard AFTER INSERT ON recording_events
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION recording_event_insert_guard();
DROP FUNCTION recording_event_row_guard();
-- +goose StatementEnd
