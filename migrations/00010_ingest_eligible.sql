-- A recording may be born eligible: ingest writes its row in state
-- eligible at seq 2 together with both its first events (received, then
-- received → eligible), instead of inserting it received and updating it
-- in a second statement. One event per transition still holds, and the
-- commit-time check of a row born at seq 2 checks both events: the first
-- enters received from nothing, the second goes received → eligible.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION recording_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NOT ((NEW.state = 'received' AND NEW.last_event_seq = 1) OR (NEW.state = 'eligible' AND NEW.last_event_seq = 2))
           OR NEW.attempt <> 0 THEN
            RAISE EXCEPTION 'recording % must start in state received with one event (or eligible with two), not % (seq %)',
                NEW.id, NEW.state, NEW.last_event_seq USING ERRCODE = 'CS001';
        END IF;
        RETURN NEW;
    END IF;

    IF TG_OP = 'DELETE' THEN
        IF NOT callscribe_purging() OR NOT (SELECT terminal FROM recording_states WHERE name = OLD.state) THEN
            RAISE EXCEPTION 'recording % (state %) may only be removed by the retention purge of terminal histories',
                OLD.id, OLD.state USING ERRCODE = 'CS002';
        END IF;
        RETURN OLD;
    END IF;

    -- UPDATE
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
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT EXISTS (SELECT 1 FROM recording_state_edges
                       WHERE from_state = OLD.state AND to_state = NEW.state) THEN
            RAISE EXCEPTION 'illegal transition % -> % for recording %', OLD.state, NEW.state, OLD.id
                USING ERRCODE = 'CS001';
        END IF;
        IF NEW.last_event_seq <> OLD.last_event_seq + 1 THEN
            RAISE EXCEPTION 'transition of recording % must append exactly one event', OLD.id
                USING ERRCODE = 'CS001';
        END IF;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION recording_event_present() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ev recording_events%ROWTYPE;
    cur recordings%ROWTYPE;
BEGIN
    SELECT * INTO cur FROM recordings WHERE id = NEW.id;
    IF NOT FOUND THEN
        RETURN NULL; -- removed later in the same transaction by the purge
    END IF;
    SELECT * INTO ev FROM recording_events WHERE recording_id = cur.id AND seq = cur.last_event_seq;
    IF NOT FOUND OR ev.new_state <> cur.state OR ev.attempt <> cur.attempt THEN
        RAISE EXCEPTION 'recording % is in state % (seq %) without a matching event',
            cur.id, cur.state, cur.last_event_seq USING ERRCODE = 'CS001';
    END IF;
    -- A row born eligible: its history is received, then received → eligible.
    IF TG_OP = 'INSERT' AND NEW.last_event_seq = 2 THEN
        IF ev.prior_state IS DISTINCT FROM 'received' OR NOT EXISTS (
               SELECT 1 FROM recording_events
               WHERE recording_id = cur.id AND seq = 1 AND prior_state IS NULL AND new_state = 'received') THEN
            RAISE EXCEPTION 'recording % born eligible without its received event before it', cur.id
                USING ERRCODE = 'CS001';
        END IF;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION recording_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'received' OR NEW.last_event_seq <> 1 OR NEW.attempt <> 0 THEN
            RAISE EXCEPTION 'recording % must start in state received with one event, not % (seq %)',
                NEW.id, NEW.state, NEW.last_event_seq USING ERRCODE = 'CS001';
        END IF;
        RETURN NEW;
    END IF;

    IF TG_OP = 'DELETE' THEN
        IF NOT callscribe_purging() OR NOT (SELECT terminal FROM recording_states WHERE name = OLD.state) THEN
            RAISE EXCEPTION 'recording % (state %) may only be removed by the retention purge of terminal histories',
                OLD.id, OLD.state USING ERRCODE = 'CS002';
        END IF;
        RETURN OLD;
    END IF;

    -- UPDATE
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
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT EXISTS (SELECT 1 FROM recording_state_edges
                       WHERE from_state = OLD.state AND to_state = NEW.state) THEN
            RAISE EXCEPTION 'illegal transition % -> % for recording %', OLD.state, NEW.state, OLD.id
                USING ERRCODE = 'CS001';
        END IF;
        IF NEW.last_event_seq <> OLD.last_event_seq + 1 THEN
            RAISE EXCEPTION 'transition of recording % must append exactly one event', OLD.id
                USING ERRCODE = 'CS001';
        END IF;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION recording_event_present() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ev recording_events%ROWTYPE;
    cur recordings%ROWTYPE;
BEGIN
    SELECT * INTO cur FROM recordings WHERE id = NEW.id;
    IF NOT FOUND THEN
        RETURN NULL; -- removed later in the same transaction by the purge
    END IF;
    SELECT * INTO ev FROM recording_events WHERE recording_id = cur.id AND seq = cur.last_event_seq;
    IF NOT FOUND OR ev.new_state <> cur.state OR ev.attempt <> cur.attempt THEN
        RAISE EXCEPTION 'recording % is in state % (seq %) without a matching event',
            cur.id, cur.state, cur.last_event_seq USING ERRCODE = 'CS001';
    END IF;
    RETURN NULL;
END
$$;

-- +goose StatementEnd
