-- Moves of several steps in one statement, and no row locks on the state
-- table.
--
-- A recording may move through several states in one UPDATE when the same
-- statement appends one event per step (a transcript received, validated and
-- committed in one transaction updates its row once, not three times). The
-- row's guard checks a one-step move against the edges at once, as before;
-- a move of several steps (the event sequence advanced by more than one) is
-- checked at commit, where recording_event_present walks the events the move
-- appended: consecutive, the first leaving the old state, each entering the
-- state the next leaves, the last entering the new state. Each event's edge
-- is checked when it is inserted (recording_event_guard). One event per
-- transition still holds, enforced by the database.
--
-- The foreign keys from recordings.state and recording_events' states to
-- recording_states go: recording_states is fixed (its rows take no UPDATE
-- or DELETE, 00006), so the key share lock each check took on a state's row
-- protected nothing, and every transition of every worker took one on the
-- same few rows (one page, a multixact per concurrent locker). A state's
-- existence is still enforced: a row is born received or eligible, every
-- state change is an edge (and an edge's states are keys of
-- recording_states), and an event's states are checked by its guard.
--
-- recordings_tenant_call goes too: the business key's unique index
-- (tenant_id, call_id, audio_sha256) serves every lookup by tenant and
-- call, and a state change is not a HOT update, so each move wrote the
-- redundant index as well.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE recordings DROP CONSTRAINT recordings_state_fkey;
ALTER TABLE recording_events DROP CONSTRAINT recording_events_prior_state_fkey;
ALTER TABLE recording_events DROP CONSTRAINT recording_events_new_state_fkey;
DROP INDEX recordings_tenant_call;

CREATE OR REPLACE FUNCTION recording_event_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.prior_state IS NULL THEN
            IF NEW.new_state <> 'received' OR NEW.seq <> 1 THEN
                RAISE EXCEPTION 'first event of recording % must enter received', NEW.recording_id
                    USING ERRCODE = 'CS001';
            END IF;
        ELSIF NEW.prior_state <> NEW.new_state THEN
            IF NOT EXISTS (SELECT 1 FROM recording_state_edges
                           WHERE from_state = NEW.prior_state AND to_state = NEW.new_state) THEN
                RAISE EXCEPTION 'illegal transition % -> % in event of recording %',
                    NEW.prior_state, NEW.new_state, NEW.recording_id USING ERRCODE = 'CS001';
            END IF;
        ELSIF NOT EXISTS (SELECT 1 FROM recording_states WHERE name = NEW.new_state) THEN
            -- A note keeps the state: it must be one.
            RAISE EXCEPTION 'event of recording % names no state: %', NEW.recording_id, NEW.new_state
                USING ERRCODE = 'CS001';
        END IF;
        RETURN NEW;
    END IF;

    IF TG_OP = 'DELETE' AND callscribe_purging()
       AND EXISTS (SELECT 1 FROM recordings r JOIN recording_states s ON s.name = r.state
                   WHERE r.id = OLD.recording_id AND s.terminal) THEN
        RETURN OLD;
    END IF;

    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'CS002';
END
$$;

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
        IF NEW.last_event_seq <= OLD.last_event_seq THEN
            RAISE EXCEPTION 'transition of recording % must append one event per step', OLD.id
                USING ERRCODE = 'CS001';
        END IF;
        -- One step: an edge, checked now. Several: their events are
        -- walked at commit (recording_event_present).
        IF NEW.last_event_seq = OLD.last_event_seq + 1 AND NOT EXISTS (
               SELECT 1 FROM recording_state_edges WHERE from_state = OLD.state AND to_state = NEW.state) THEN
            RAISE EXCEPTION 'illegal transition % -> % for recording %', OLD.state, NEW.state, OLD.id
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
    prev text;
    want integer;
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
    -- A move of several steps in one UPDATE: the events it appended lead
    -- from the old state to the new one, one step each.
    IF TG_OP = 'UPDATE' AND NEW.last_event_seq > OLD.last_event_seq + 1 THEN
        prev := OLD.state;
        want := OLD.last_event_seq + 1;
        FOR ev IN SELECT * FROM recording_events
                  WHERE recording_id = NEW.id AND seq > OLD.last_event_seq AND seq <= NEW.last_event_seq
                  ORDER BY seq LOOP
            IF ev.seq <> want OR ev.prior_state IS DISTINCT FROM prev THEN
                RAISE EXCEPTION 'recording % moved % -> % without an event per step (event % leaves %, not %)',
                    NEW.id, OLD.state, NEW.state, ev.seq, ev.prior_state, prev USING ERRCODE = 'CS001';
            END IF;
            prev := ev.new_state;
            want := want + 1;
        END LOOP;
        IF want <> NEW.last_event_seq + 1 OR prev IS DISTINCT FROM NEW.state THEN
            RAISE EXCEPTION 'recording % moved % -> % (seq % -> %) without an event per step',
                NEW.id, OLD.state, NEW.state, OLD.last_event_seq, NEW.last_event_seq USING ERRCODE = 'CS001';
        END IF;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION recording_event_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.prior_state IS NULL THEN
            IF NEW.new_state <> 'received' OR NEW.seq <> 1 THEN
                RAISE EXCEPTION 'first event of recording % must enter received', NEW.recording_id
                    USING ERRCODE = 'CS001';
            END IF;
        ELSIF NEW.prior_state <> NEW.new_state AND NOT EXISTS (
                SELECT 1 FROM recording_state_edges
                WHERE from_state = NEW.prior_state AND to_state = NEW.new_state) THEN
            RAISE EXCEPTION 'illegal transition % -> % in event of recording %',
                NEW.prior_state, NEW.new_state, NEW.recording_id USING ERRCODE = 'CS001';
        END IF;
        RETURN NEW;
    END IF;

    IF TG_OP = 'DELETE' AND callscribe_purging()
       AND EXISTS (SELECT 1 FROM recordings r JOIN recording_states s ON s.name = r.state
                   WHERE r.id = OLD.recording_id AND s.terminal) THEN
        RETURN OLD;
    END IF;

    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'CS002';
END
$$;

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

ALTER TABLE recording_events ADD CONSTRAINT recording_events_new_state_fkey FOREIGN KEY (new_state) REFERENCES recording_states (name);
ALTER TABLE recording_events ADD CONSTRAINT recording_events_prior_state_fkey FOREIGN KEY (prior_state) REFERENCES recording_states (name);
ALTER TABLE recordings ADD CONSTRAINT recordings_state_fkey FOREIGN KEY (state) REFERENCES recording_states (name);
CREATE INDEX recordings_tenant_call ON recordings (tenant_id, call_id);
-- +goose StatementEnd
