-- Replay runs: `callscribe replay` as durable, throttled, resumable work.
--
-- A run (replay_runs) names a window of recordings (ingest time, tenant,
-- state) and a named CRM target; it enumerates the window in chunks, one
-- transaction per chunk that enqueues the chunk's River jobs and moves the
-- run's cursor, so that a run stopped at any point resumes after its last
-- chunk. Each committed action set of a replayed recording becomes one
-- replay delivery (replay_deliveries) with its own state, tries and
-- deadline, delivered by the replay queue's workers through the target's
-- own scope (deferral and window) like every outbox delivery; each try is
-- recorded (replay_tries) with the scope sequence and instant of the
-- admission that let it go, so that "sent inside a cooldown callscribe
-- already knew of" is judged exactly, as for the speech vendors.
--
-- The tables hold no tenant, call or idempotency key: the action set's id
-- names the set, and a retention purge of the set leaves only numbers.
-- Rows are never deleted by the runtime role; states only move forward.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE replay_runs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    target            text NOT NULL CHECK (target <> ''),
    scope             text NOT NULL CHECK (scope <> ''),
    tenant_id         text NOT NULL DEFAULT '',
    recording_state   text NOT NULL CHECK (recording_state <> ''),
    window_from       timestamptz NOT NULL,
    window_to         timestamptz NOT NULL CHECK (window_to > window_from),
    started_by        text NOT NULL CHECK (started_by <> ''),
    -- 0: no ceiling but the target's own signals.
    max_rate          double precision NOT NULL DEFAULT 0 CHECK (max_rate >= 0 AND max_rate <= 10000),
    -- The rate ceiling's theoretical arrival time (GCRA): the next send
    -- may go at or after it.
    rate_tat          timestamptz,
    delivery_deadline interval NOT NULL CHECK (delivery_deadline > interval '0'),
    state             text NOT NULL DEFAULT 'enumerating'
                      CHECK (state IN ('enumerating', 'running', 'done', 'cancelled')),
    cursor_created_at timestamptz,
    cursor_id         uuid,
    -- Recordings enqueued (chunks) and re-driven (their job done).
    enumerated        bigint NOT NULL DEFAULT 0 CHECK (enumerated >= 0),
    redriven          bigint NOT NULL DEFAULT 0 CHECK (redriven >= 0),
    reason            text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    finished_at       timestamptz
);
CREATE INDEX replay_runs_active ON replay_runs (id) WHERE state IN ('enumerating', 'running');

CREATE TABLE replay_deliveries (
    run_id        bigint NOT NULL REFERENCES replay_runs (id),
    action_set_id bigint NOT NULL,
    state         text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead', 'cancelled')),
    attempts      integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- Answers that put the delivery back in line: throttled (429, a 503
    -- with Retry-After) and transient (5xx, network).
    throttled     integer NOT NULL DEFAULT 0 CHECK (throttled >= 0),
    transient     integer NOT NULL DEFAULT 0 CHECK (transient >= 0),
    -- applied (201), replayed (200), or what ended it.
    outcome       text NOT NULL DEFAULT '',
    last_class    text NOT NULL DEFAULT '',
    crm_id        text NOT NULL DEFAULT '',
    reason        text NOT NULL DEFAULT '',
    not_before    timestamptz,
    deadline      timestamptz NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (run_id, action_set_id)
);
CREATE INDEX replay_deliveries_pending ON replay_deliveries (run_id) WHERE state = 'pending';

CREATE TABLE replay_tries (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id         bigint NOT NULL,
    action_set_id  bigint NOT NULL,
    attempt        integer NOT NULL CHECK (attempt >= 1),
    scope          text NOT NULL,
    -- The admission that let the try go: the scope's sequence number it
    -- read and the database instant it compared the scope's deadline to.
    admitted_seq   bigint NOT NULL,
    admitted_at    timestamptz NOT NULL,
    -- The rate ceiling's slot the try took (NULL: no ceiling).
    rate_slot      timestamptz,
    sent_at        timestamptz NOT NULL,
    -- The answer, recorded when the try settles (NULL: not yet, or the
    -- process stopped before it).
    answered_at    timestamptz,
    outcome        text,
    response_class text,
    http_status    integer,
    FOREIGN KEY (run_id, action_set_id) REFERENCES replay_deliveries (run_id, action_set_id),
    UNIQUE (run_id, action_set_id, attempt)
);
CREATE INDEX replay_tries_scope_sent ON replay_tries (scope, sent_at);

-- States only move forward: a run from enumerating to running to done, or
-- to cancelled; a delivery from pending to one end.
CREATE FUNCTION replay_forward_only() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.state = NEW.state THEN
        RETURN NEW;
    END IF;
    IF TG_TABLE_NAME = 'replay_runs' AND (OLD.state, NEW.state) IN
        (('enumerating', 'running'), ('enumerating', 'cancelled'), ('running', 'done'), ('running', 'cancelled')) THEN
        RETURN NEW;
    END IF;
    IF TG_TABLE_NAME = 'replay_deliveries' AND OLD.state = 'pending' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '% state may not move % -> %', TG_TABLE_NAME, OLD.state, NEW.state USING ERRCODE = 'CS001';
END
$$;
CREATE TRIGGER replay_runs_forward_only BEFORE UPDATE OF state ON replay_runs
    FOR EACH ROW EXECUTE FUNCTION replay_forward_only();
CREATE TRIGGER replay_deliveries_forward_only BEFORE UPDATE OF state ON replay_deliveries
    FOR EACH ROW EXECUTE FUNCTION replay_forward_only();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE replay_tries;
DROP TABLE replay_deliveries;
DROP TABLE replay_runs;
DROP FUNCTION replay_forward_only();
-- +goose StatementEnd
