-- The outbox: committed action sets, one delivery row per set, and the
-- append-only history of every delivery try. The set, its outbox row, the
-- River job that delivers it and the validated -> committed transition are
-- written in one transaction (outbox.Commit).

-- +goose Up
-- +goose StatementBegin
CREATE TABLE action_sets (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recording_id     uuid NOT NULL REFERENCES recordings (id),
    tenant_id        text NOT NULL,
    call_id          text NOT NULL,
    action_version   integer NOT NULL CHECK (action_version >= 1),
    recording_sha256 text NOT NULL,
    actions          jsonb NOT NULL,
    committed_at     timestamptz NOT NULL,
    CONSTRAINT action_sets_version UNIQUE (tenant_id, call_id, action_version)
);

CREATE TABLE outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action_set_id   bigint NOT NULL REFERENCES action_sets (id),
    target          text NOT NULL,
    scope           text NOT NULL,
    idempotency_key text NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts        integer NOT NULL DEFAULT 0,
    crm_id          text NOT NULL DEFAULT '',
    last_class      text NOT NULL DEFAULT '',
    not_before      timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT outbox_set_target UNIQUE (action_set_id, target)
);

CREATE INDEX outbox_state ON outbox (state, updated_at);

CREATE TABLE outbox_events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_id       bigint NOT NULL REFERENCES outbox (id),
    attempt         integer NOT NULL,
    at              timestamptz NOT NULL,
    prior_state     text NOT NULL,
    new_state       text NOT NULL,
    outcome         text NOT NULL,
    response_class  text NOT NULL DEFAULT '',
    http_status     integer NOT NULL DEFAULT 0,
    crm_id          text NOT NULL DEFAULT '',
    retry_after_raw text,
    reason          text NOT NULL DEFAULT ''
);

CREATE INDEX outbox_events_outbox ON outbox_events (outbox_id, id);

-- Delivered and dead are final for the dispatcher; only an operator's
-- `outbox retry` moves dead back to pending.
CREATE FUNCTION outbox_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state AND NOT (
        (OLD.state = 'pending' AND NEW.state IN ('delivered', 'dead')) OR
        (OLD.state = 'dead' AND NEW.state = 'pending')) THEN
        RAISE EXCEPTION 'outbox row %: % -> % is not allowed', OLD.id, OLD.state, NEW.state USING ERRCODE = 'CS001';
    END IF;
    IF NEW.idempotency_key <> OLD.idempotency_key OR NEW.action_set_id <> OLD.action_set_id THEN
        RAISE EXCEPTION 'outbox row % identity is immutable', OLD.id USING ERRCODE = 'CS002';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER outbox_guard BEFORE UPDATE ON outbox
    FOR EACH ROW EXECUTE FUNCTION outbox_guard();

CREATE TRIGGER outbox_events_append_only BEFORE UPDATE OR DELETE ON outbox_events
    FOR EACH ROW EXECUTE FUNCTION append_only();

CREATE TRIGGER action_sets_append_only BEFORE UPDATE OR DELETE ON action_sets
    FOR EACH ROW EXECUTE FUNCTION append_only();

-- Counters the operators watch (duplicate_key_conflicts, ...).
CREATE TABLE counters (
    name  text PRIMARY KEY,
    value bigint NOT NULL DEFAULT 0
);

-- An operator may re-validate a committed recording to produce a new
-- action version (callscribe jobs revalidate).
INSERT INTO recording_state_edges (from_state, to_state) VALUES ('committed', 'validated');
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DELETE FROM recording_state_edges WHERE from_state = 'committed' AND to_state = 'validated';
DROP TABLE counters;
DROP TABLE outbox_events;
DROP TABLE outbox;
DROP FUNCTION outbox_guard();
DROP TABLE action_sets;
-- +goose StatementEnd
