-- The ledger: one current row per recording, its append-only event history,
-- and the state machine that both obey. The states and edges below must equal
-- ledger.Edges() in Go; ledger's TestStateMachineMatchesDatabase proves it.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE recording_states (
    name     text PRIMARY KEY,
    terminal boolean NOT NULL
);

INSERT INTO recording_states (name, terminal) VALUES
    ('received',    false),
    ('eligible',    false),
    ('submitted',   false),
    ('retry_wait',  false),
    ('transcribed', false),
    ('validated',   false),
    ('committed',   true),
    ('expired',     true),
    ('failed',      true);

CREATE TABLE recording_state_edges (
    from_state text NOT NULL REFERENCES recording_states (name),
    to_state   text NOT NULL REFERENCES recording_states (name),
    PRIMARY KEY (from_state, to_state)
);

INSERT INTO recording_state_edges (from_state, to_state) VALUES
    ('received',    'eligible'),
    ('eligible',    'submitted'),
    ('submitted',   'transcribed'),
    ('submitted',   'retry_wait'),
    ('retry_wait',  'eligible'),
    ('transcribed', 'validated'),
    ('validated',   'committed'),
    ('eligible',    'failed'),
    ('submitted',   'failed'),
    ('transcribed', 'failed');

-- Every non-terminal state may expire.
INSERT INTO recording_state_edges (from_state, to_state)
SELECT name, 'expired' FROM recording_states WHERE NOT terminal;

CREATE TABLE recordings (
    id             uuid PRIMARY KEY,
    tenant_id      text NOT NULL CHECK (tenant_id <> '' AND strpos(tenant_id, ':') = 0),
    call_id        text NOT NULL CHECK (call_id <> ''),
    audio_sha256   text NOT NULL CHECK (audio_sha256 ~ '^[0-9a-f]{64}$'),
    business_key   text GENERATED ALWAYS AS (tenant_id || ':' || call_id || ':' || audio_sha256) STORED,
    state          text NOT NULL REFERENCES recording_states (name),
    attempt        integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    lane           text NOT NULL CHECK (lane IN ('immediate', 'batch')),
    audio_uri      text NOT NULL DEFAULT '',
    audio_bytes    bigint NOT NULL DEFAULT 0 CHECK (audio_bytes >= 0),
    deadline       timestamptz,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    last_event_seq integer NOT NULL CHECK (last_event_seq >= 1),
    CONSTRAINT recordings_business_key UNIQUE (tenant_id, call_id, audio_sha256)
);

CREATE INDEX recordings_tenant_call ON recordings (tenant_id, call_id);
CREATE INDEX recordings_state_updated ON recordings (state, updated_at);

CREATE TABLE recording_events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recording_id    uuid NOT NULL REFERENCES recordings (id),
    seq             integer NOT NULL CHECK (seq >= 1),
    prior_state     text REFERENCES recording_states (name),
    new_state       text NOT NULL REFERENCES recording_states (name),
    attempt         integer NOT NULL CHECK (attempt >= 0),
    at              timestamptz NOT NULL,
    reason          text NOT NULL DEFAULT '',
    response_class  text NOT NULL DEFAULT '',
    retry_after_raw text,
    detail          jsonb NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT recording_events_seq UNIQUE (recording_id, seq)
);

-- The audit trail of the retention purge: the one path that deletes events.
CREATE TABLE retention_purges (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at                 timestamptz NOT NULL,
    cutoff             timestamptz NOT NULL,
    recordings_deleted integer NOT NULL,
    events_deleted     integer NOT NULL,
    reason             text NOT NULL DEFAULT ''
);

-- SQLSTATE CS001: a transition that the state machine does not allow.
-- SQLSTATE CS002: an attempt to change or remove audit history.
CREATE FUNCTION recording_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'received' OR NEW.last_event_seq <> 1 OR NEW.attempt <> 0 THEN
            RAISE EXCEPTION 'recording % must start in state received with one event, not % (seq %)',
                NEW.id, NEW.state, NEW.last_event_seq USING ERRCODE = 'CS001';
        END IF;
        RETURN NEW;
    END IF;

    IF TG_OP = 'DELETE' THEN
        IF coalesce(current_setting('callscribe.retention_purge', true), '') <> 'on'
           OR NOT (SELECT terminal FROM recording_states WHERE name = OLD.state) THEN
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

CREATE TRIGGER recording_guard
    BEFORE INSERT OR UPDATE OR DELETE ON recordings
    FOR EACH ROW EXECUTE FUNCTION recording_guard();

-- At commit, the row's latest event must exist and agree with the row: no
-- state change without its event, whatever code path wrote it.
CREATE FUNCTION recording_event_present() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE CONSTRAINT TRIGGER recording_event_present
    AFTER INSERT OR UPDATE ON recordings
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION recording_event_present();

CREATE FUNCTION recording_event_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.prior_state IS NULL THEN
            IF NEW.new_state <> 'received' OR NEW.seq <> 1 THEN
                RAISE EXCEPTION 'first event of recording % must enter received', NEW.recording_id
                    USING ERRCODE = 'CS001';
            END IF;
        ELSIF NOT EXISTS (SELECT 1 FROM recording_state_edges
                          WHERE from_state = NEW.prior_state AND to_state = NEW.new_state) THEN
            RAISE EXCEPTION 'illegal transition % -> % in event of recording %',
                NEW.prior_state, NEW.new_state, NEW.recording_id USING ERRCODE = 'CS001';
        END IF;
        RETURN NEW;
    END IF;

    IF TG_OP = 'DELETE'
       AND coalesce(current_setting('callscribe.retention_purge', true), '') = 'on'
       AND EXISTS (SELECT 1 FROM recordings r JOIN recording_states s ON s.name = r.state
                   WHERE r.id = OLD.recording_id AND s.terminal) THEN
        RETURN OLD;
    END IF;

    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'CS002';
END
$$;

CREATE TRIGGER recording_event_guard
    BEFORE INSERT OR UPDATE OR DELETE ON recording_events
    FOR EACH ROW EXECUTE FUNCTION recording_event_guard();

CREATE FUNCTION append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'CS002';
END
$$;

CREATE TRIGGER recording_events_no_truncate
    BEFORE TRUNCATE ON recording_events
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();

CREATE TRIGGER retention_purges_append_only
    BEFORE UPDATE OR DELETE ON retention_purges
    FOR EACH ROW EXECUTE FUNCTION append_only();

CREATE TRIGGER retention_purges_no_truncate
    BEFORE TRUNCATE ON retention_purges
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();

-- The retention purge: removes whole histories (events and row) of at most
-- max_recordings terminal recordings last changed before cutoff, and records
-- that it did. The only path by which events are ever deleted.
CREATE FUNCTION ledger_retention_purge(cutoff timestamptz, purge_at timestamptz, max_recordings integer, purge_reason text)
    RETURNS TABLE (recordings_deleted integer, events_deleted integer)
    LANGUAGE plpgsql AS $$
DECLARE
    victims uuid[];
    n_rec integer;
    n_ev integer;
BEGIN
    SELECT coalesce(array_agg(id), '{}') INTO victims FROM (
        SELECT r.id FROM recordings r JOIN recording_states s ON s.name = r.state
        WHERE s.terminal AND r.updated_at < cutoff
        ORDER BY r.updated_at
        LIMIT max_recordings
        FOR UPDATE OF r SKIP LOCKED
    ) v;

    PERFORM set_config('callscribe.retention_purge', 'on', true);
    DELETE FROM recording_events WHERE recording_id = ANY (victims);
    GET DIAGNOSTICS n_ev = ROW_COUNT;
    DELETE FROM recordings WHERE id = ANY (victims);
    GET DIAGNOSTICS n_rec = ROW_COUNT;
    PERFORM set_config('callscribe.retention_purge', 'off', true);

    INSERT INTO retention_purges (at, cutoff, recordings_deleted, events_deleted, reason)
    VALUES (purge_at, cutoff, n_rec, n_ev, purge_reason);

    RETURN QUERY SELECT n_rec, n_ev;
END
$$;

-- Scope deferrals: the shared "not before" of a throttling scope. It only
-- ever moves forward (GREATEST); every extension offered is recorded.
CREATE TABLE scope_deferrals (
    scope      text PRIMARY KEY CHECK (scope <> ''),
    not_before timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE scope_deferral_extensions (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope                text NOT NULL REFERENCES scope_deferrals (scope),
    offered_not_before   timestamptz NOT NULL,
    resulting_not_before timestamptz NOT NULL,
    retry_after_raw      text,
    source               text NOT NULL DEFAULT '',
    clamped              boolean NOT NULL DEFAULT false,
    job_id               bigint,
    recording_id         uuid,
    reason               text NOT NULL DEFAULT '',
    at                   timestamptz NOT NULL
);

CREATE INDEX scope_deferral_extensions_scope_at ON scope_deferral_extensions (scope, at);

CREATE FUNCTION scope_deferral_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.not_before < OLD.not_before THEN
        RAISE EXCEPTION 'scope % deferral may not move backward (% -> %)', OLD.scope, OLD.not_before, NEW.not_before
            USING ERRCODE = 'CS002';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER scope_deferral_forward_only
    BEFORE UPDATE ON scope_deferrals
    FOR EACH ROW EXECUTE FUNCTION scope_deferral_forward_only();

CREATE TRIGGER scope_deferral_extensions_append_only
    BEFORE UPDATE OR DELETE ON scope_deferral_extensions
    FOR EACH ROW EXECUTE FUNCTION append_only();

CREATE TRIGGER scope_deferral_extensions_no_truncate
    BEFORE TRUNCATE ON scope_deferral_extensions
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE scope_deferral_extensions;
DROP TABLE scope_deferrals;
DROP FUNCTION scope_deferral_forward_only();
DROP FUNCTION ledger_retention_purge(timestamptz, timestamptz, integer, text);
DROP TABLE retention_purges;
DROP TABLE recording_events;
DROP TABLE recordings;
DROP FUNCTION append_only();
DROP FUNCTION recording_event_guard();
DROP FUNCTION recording_event_present();
DROP FUNCTION recording_guard();
DROP TABLE recording_state_edges;
DROP TABLE recording_states;
-- +goose StatementEnd
