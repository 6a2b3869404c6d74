-- The ledger's insert guards check a statement, not each row.
--
-- An ingest writes up to 1,000 recordings in one statement, each with its
-- two events (received, then received → eligible). Until now every row
-- fired a plpgsql trigger: recording_guard per recording and
-- recording_event_guard per event as they were written, and
-- recording_event_present per recording again at commit. That was 3,000
-- trigger calls and 4,000 single-row lookups for every chunk of 1,000,
-- about half of the chunk's time in the database.
--
-- The same rules are now checked once per statement, over the statement's
-- transition tables, by one query each:
--
--   recording_insert_guard (AFTER INSERT ON recordings, per statement):
--     every new recording starts in received with one event or eligible
--     with two, attempt 0; and its history is there, written by the same
--     statement: event 1 enters received from nothing, and a row born
--     eligible has event 2, received → eligible. (recording_event_present
--     checked the same at commit; every insert callscribe makes writes the
--     row and its events in one statement, RecordingInsert and
--     RecordingInsertBatchEligible, so the check can come at the
--     statement's end.)
--
--   recording_event_insert_guard (AFTER INSERT ON recording_events, per
--     statement): a first event (no prior state) enters received at seq 1;
--     a change of state is an edge of recording_state_edges; a note (the
--     same state) names a state of recording_states.
--
-- An AFTER STATEMENT trigger that raises aborts the statement as the
-- BEFORE ROW trigger did: nothing it wrote is kept. The row-level triggers
-- keep guarding UPDATE and DELETE (and recording_event_present the moves
-- of several steps, at commit) unchanged. Their functions keep their
-- INSERT branches, unused now, so that Down only re-attaches them.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION recording_insert_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    -- Each new row's events 1 and 2 by the (recording_id, seq) key: an
    -- index probe per row, whatever the table's size.
    SELECT b.id, b.state, b.last_event_seq,
           ((b.state = 'received' AND b.last_event_seq = 1) OR (b.state = 'eligible' AND b.last_event_seq = 2))
               AND b.attempt = 0 AS born_right
      INTO bad
      FROM born b
      CROSS JOIN LATERAL (
          SELECT count(*) FILTER (WHERE e.seq = 1 AND e.prior_state IS NULL AND e.new_state = 'received' AND e.attempt = 0) AS first,
                 count(*) FILTER (WHERE e.seq = 2 AND e.prior_state = 'received' AND e.new_state = 'eligible' AND e.attempt = 0) AS second
            FROM recording_events e
           WHERE e.recording_id = b.id AND e.seq <= 2
      ) h
     WHERE NOT ((b.state = 'received' AND b.last_event_seq = 1) OR (b.state = 'eligible' AND b.last_event_seq = 2))
        OR b.attempt <> 0
        OR h.first <> 1
        OR (b.last_event_seq = 2 AND h.second <> 1)
     LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NOT bad.born_right THEN
        RAISE EXCEPTION 'recording % must start in state received with one event (or eligible with two), not % (seq %)',
            bad.id, bad.state, bad.last_event_seq USING ERRCODE = 'CS001';
    END IF;
    RAISE EXCEPTION 'recording % is in state % (seq %) without a matching event: a new recording is written with its history in one statement (received, and received → eligible for one born eligible)',
        bad.id, bad.state, bad.last_event_seq USING ERRCODE = 'CS001';
END
$$;

CREATE FUNCTION recording_event_insert_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT a.recording_id, a.seq, a.prior_state, a.new_state
      INTO bad
      FROM added a
     WHERE CASE
               WHEN a.prior_state IS NULL THEN a.new_state <> 'received' OR a.seq <> 1
               WHEN a.prior_state <> a.new_state THEN NOT EXISTS (
                   SELECT 1 FROM recording_state_edges g WHERE g.from_state = a.prior_state AND g.to_state = a.new_state)
               ELSE NOT EXISTS (SELECT 1 FROM recording_states s WHERE s.name = a.new_state)
           END
     LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF bad.prior_state IS NULL THEN
        RAISE EXCEPTION 'first event of recording % must enter received', bad.recording_id
            USING ERRCODE = 'CS001';
    ELSIF bad.prior_state <> bad.new_state THEN
        RAISE EXCEPTION 'illegal transition % -> % in event of recording %',
            bad.prior_state, bad.new_state, bad.recording_id USING ERRCODE = 'CS001';
    END IF;
    -- A note keeps the state: it must be one.
    RAISE EXCEPTION 'event of recording % names no state: %', bad.recording_id, bad.new_state
        USING ERRCODE = 'CS001';
END
$$;

-- Pinned search_path, as every function of the schema (migration 00014).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION recording_insert_guard() SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION recording_event_insert_guard() SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

DROP TRIGGER recording_guard ON recordings;
CREATE TRIGGER recording_guard BEFORE UPDATE OR DELETE ON recordings
    FOR EACH ROW EXECUTE FUNCTION recording_guard();
CREATE TRIGGER recording_insert_guard AFTER INSERT ON recordings
    REFERENCING NEW TABLE AS born
    FOR EACH STATEMENT EXECUTE FUNCTION recording_insert_guard();

DROP TRIGGER recording_event_present ON recordings;
CREATE CONSTRAINT TRIGGER recording_event_present AFTER UPDATE ON recordings
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION recording_event_present();

DROP TRIGGER recording_event_guard ON recording_events;
CREATE TRIGGER recording_event_guard BEFORE UPDATE OR DELETE ON recording_events
    FOR EACH ROW EXECUTE FUNCTION recording_event_guard();
CREATE TRIGGER recording_event_insert_guard AFTER INSERT ON recording_events
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION recording_event_insert_guard();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER recording_event_insert_guard ON recording_events;
DROP TRIGGER recording_event_guard ON recording_events;
CREATE TRIGGER recording_event_guard BEFORE INSERT OR UPDATE OR DELETE ON recording_events
    FOR EACH ROW EXECUTE FUNCTION recording_event_guard();

DROP TRIGGER recording_event_present ON recordings;
CREATE CONSTRAINT TRIGGER recording_event_present AFTER INSERT OR UPDATE ON recordings
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION recording_event_present();

DROP TRIGGER recording_insert_guard ON recordings;
DROP TRIGGER recording_guard ON recordings;
CREATE TRIGGER recording_guard BEFORE INSERT OR UPDATE OR DELETE ON recordings
    FOR EACH ROW EXECUTE FUNCTION recording_guard();

DROP FUNCTION recording_event_insert_guard();
DROP FUNCTION recording_insert_guard();
-- +goose StatementEnd
