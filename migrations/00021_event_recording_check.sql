-- An event's recording is checked once per statement, not by a foreign
-- key row by row; a new recording's history by two probes of the
-- (recording_id, seq) key, not a count.
--
-- recording_events.recording_id referenced recordings (id): PostgreSQL
-- checks a foreign key with a trigger call and a query per row, 2,000 for
-- an ingest chunk of 1,000 recordings (each with its two events), about as
-- much time as the rest of the statement's guards together. The rule
-- stays, checked by the guards that already run once per statement:
--
--   recording_event_insert_guard (AFTER INSERT ON recording_events, per
--     statement) now also finds each event's recording, once per
--     recording the statement wrote events of, and holds it FOR KEY SHARE
--     until the transaction ends, the lock the foreign key took: a
--     recording that does not exist, or was deleted before the lock was
--     granted, refuses the statement (SQLSTATE 23503,
--     foreign_key_violation, as before); one being deleted is waited for.
--
--   recording_delete_check (AFTER DELETE ON recordings, per statement,
--     new) refuses a delete that leaves an event without its recording
--     (23503), the foreign key's check on the other side. The retention
--     purge, the only delete there is, removes a recording's events first.
--     It reads with a snapshot of its own, which sees every event
--     committed before it: at read committed, the isolation the ledger
--     runs at. Any other isolation is refused, as its snapshot, taken
--     when the transaction began, could miss an event committed since,
--     which the foreign key's check would not.
--
-- Why no event can be left without its recording: an event's statement
-- holds its recording (KEY SHARE) from its end to its commit; a delete
-- must lock the row exclusively, so it runs either before the event's lock
-- (the event's statement then finds no row, and fails) or after the
-- event's transaction ended (committed: the delete's check sees the
-- event, and fails; rolled back: there is no event). The purge selects
-- its victims FOR UPDATE SKIP LOCKED, so it passes over a recording whose
-- event is being written rather than failing. TRUNCATE of either table is
-- refused by its trigger, as before.
--
-- recording_insert_guard probes a new recording's events 1 and 2 with one
-- scalar subquery each on the (recording_id, seq) unique key, instead of
-- counting its events up to seq 2: an index lookup of one row, which no
-- planner estimate turns into a scan of the whole table (a join would,
-- on a database with no statistics yet).

-- +goose Up
-- +goose StatementBegin
ALTER TABLE recording_events DROP CONSTRAINT recording_events_recording_id_fkey;

CREATE OR REPLACE FUNCTION recording_event_insert_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
    orphan uuid;
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
    IF FOUND THEN
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
    END IF;

    -- Each recording written to exists, held until the transaction ends.
    -- The locking subquery stays a probe of recordings' key per recording
    -- (a sublink with FOR KEY SHARE is not turned into a join).
    SELECT a.recording_id
      INTO orphan
      FROM (SELECT DISTINCT recording_id FROM added) a
     WHERE NOT EXISTS (SELECT 1 FROM recordings r WHERE r.id = a.recording_id FOR KEY SHARE OF r)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'event of recording %: no such recording', orphan
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION recording_insert_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT b.id, b.state, b.last_event_seq,
           ((b.state = 'received' AND b.last_event_seq = 1) OR (b.state = 'eligible' AND b.last_event_seq = 2))
               AND b.attempt = 0 AS born_right
      INTO bad
      FROM born b
     WHERE NOT ((b.state = 'received' AND b.last_event_seq = 1) OR (b.state = 'eligible' AND b.last_event_seq = 2))
        OR b.attempt <> 0
        -- Event 1 by the (recording_id, seq) key: received, from nothing.
        OR (SELECT e.prior_state IS NULL AND e.new_state = 'received' AND e.attempt = 0
              FROM recording_events e WHERE e.recording_id = b.id AND e.seq = 1) IS NOT TRUE
        -- Event 2 of a row born eligible: received → eligible.
        OR (b.last_event_seq = 2 AND (SELECT e.prior_state = 'received' AND e.new_state = 'eligible' AND e.attempt = 0
              FROM recording_events e WHERE e.recording_id = b.id AND e.seq = 2) IS NOT TRUE)
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

CREATE FUNCTION recording_delete_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kept uuid;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'recordings are deleted at read committed only, not %: a snapshot older than the delete could miss an event of the recording',
            current_setting('transaction_isolation') USING ERRCODE = 'CS001';
    END IF;
    SELECT g.id INTO kept
      FROM gone g
     WHERE EXISTS (SELECT 1 FROM recording_events e WHERE e.recording_id = g.id)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'recording % is deleted while its events are kept: delete its events first', kept
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;

-- CREATE OR REPLACE keeps no SET clause: pin every function again, as
-- every function of the schema is (migration 00014).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION recording_event_insert_guard() SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION recording_insert_guard() SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION recording_delete_check() SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

CREATE TRIGGER recording_delete_check AFTER DELETE ON recordings
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION recording_delete_check();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER recording_delete_check ON recordings;
DROP FUNCTION recording_delete_check();

CREATE OR REPLACE FUNCTION recording_insert_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
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

CREATE OR REPLACE FUNCTION recording_event_insert_guard() RETURNS trigger LANGUAGE plpgsql AS $$
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

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION recording_event_insert_guard() SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION recording_insert_guard() SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

ALTER TABLE recording_events ADD CONSTRAINT recording_events_recording_id_fkey
    FOREIGN KEY (recording_id) REFERENCES recordings (id);
-- +goose StatementEnd
