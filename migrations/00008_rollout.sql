-- Rollout by tenant cohort: each cohort's deferral mode, `observe` (the
-- platform records the throttling it would enforce but lets every request
-- through) or `enforce`, switchable at run time (`callscribe rollout set`).
-- A cohort without a row enforces. Every change is an event.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE rollout_cohorts (
    cohort     text PRIMARY KEY CHECK (cohort ~ '^[A-Za-z0-9._-]{1,128}$'),
    mode       text NOT NULL CHECK (mode IN ('observe', 'enforce')),
    reason     text NOT NULL DEFAULT '' CHECK (length(reason) <= 512),
    updated_at timestamptz NOT NULL
);

CREATE TABLE rollout_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cohort      text NOT NULL,
    prior_mode  text,
    mode        text NOT NULL,
    reason      text NOT NULL DEFAULT '',
    at          timestamptz NOT NULL
);

CREATE TRIGGER rollout_events_append_only BEFORE UPDATE OR DELETE ON rollout_events
    FOR EACH ROW EXECUTE FUNCTION append_only();
CREATE TRIGGER rollout_events_no_truncate BEFORE TRUNCATE ON rollout_events
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE TRIGGER rollout_cohorts_no_delete BEFORE DELETE ON rollout_cohorts
    FOR EACH ROW EXECUTE FUNCTION append_only();
CREATE TRIGGER rollout_cohorts_no_truncate BEFORE TRUNCATE ON rollout_cohorts
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE rollout_events;
DROP TABLE rollout_cohorts;
-- +goose StatementEnd
