-- The pipeline's additions to the ledger: what a worker needs on the row
-- (vendor id, model, when to try again), transcripts, notes (events that
-- record something without changing state: a poll answer, a resubmission),
-- operator re-drives of reviewable recordings, and scope admission control
-- (probe after a cooldown, operator pause, observe-only offers).

-- +goose Up
-- +goose StatementBegin
ALTER TABLE recordings
    ADD COLUMN provider     text NOT NULL DEFAULT '',
    ADD COLUMN provider_id  text NOT NULL DEFAULT '',
    ADD COLUMN model        text NOT NULL DEFAULT '',
    ADD COLUMN language     text NOT NULL DEFAULT '',
    ADD COLUMN not_before   timestamptz,
    ADD COLUMN started_at   timestamptz;

CREATE INDEX recordings_deadline_open ON recordings (deadline)
    WHERE state NOT IN ('committed', 'expired', 'failed');

-- An operator may re-drive a reviewable recording (callscribe jobs retry).
INSERT INTO recording_state_edges (from_state, to_state) VALUES
    ('expired', 'eligible'),
    ('failed',  'eligible');

CREATE TABLE transcripts (
    recording_id     uuid PRIMARY KEY REFERENCES recordings (id),
    provider         text NOT NULL,
    provider_id      text NOT NULL DEFAULT '',
    text             text NOT NULL,
    language         text NOT NULL DEFAULT '',
    confidence       double precision NOT NULL,
    duration_seconds double precision NOT NULL,
    segments         jsonb NOT NULL DEFAULT '[]'::jsonb,
    created_at       timestamptz NOT NULL
);

-- Notes: an event whose prior and new state are both the current state.
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

    IF TG_OP = 'DELETE'
       AND coalesce(current_setting('callscribe.retention_purge', true), '') = 'on'
       AND EXISTS (SELECT 1 FROM recordings r JOIN recording_states s ON s.name = r.state
                   WHERE r.id = OLD.recording_id AND s.terminal) THEN
        RETURN OLD;
    END IF;

    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'CS002';
END
$$;

-- The purge removes transcripts with their histories.
CREATE OR REPLACE FUNCTION ledger_retention_purge(cutoff timestamptz, purge_at timestamptz, max_recordings integer, purge_reason text)
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
    DELETE FROM transcripts WHERE recording_id = ANY (victims);
    DELETE FROM recordings WHERE id = ANY (victims);
    GET DIAGNOSTICS n_rec = ROW_COUNT;
    PERFORM set_config('callscribe.retention_purge', 'off', true);

    INSERT INTO retention_purges (at, cutoff, recordings_deleted, events_deleted, reason)
    VALUES (purge_at, cutoff, n_rec, n_ev, purge_reason);

    RETURN QUERY SELECT n_rec, n_ev;
END
$$;

-- Admission control per scope. After a deadline moves, the first request
-- after it is a probe: one job claims it; the rest wait until it succeeds.
ALTER TABLE scope_deferrals
    ADD COLUMN needs_probe      boolean NOT NULL DEFAULT false,
    ADD COLUMN probe_job_id     bigint,
    ADD COLUMN probe_claimed_at timestamptz,
    ADD COLUMN paused           boolean NOT NULL DEFAULT false,
    ADD COLUMN paused_reason    text NOT NULL DEFAULT '',
    ADD COLUMN paused_at        timestamptz;

-- Observe-only offers are recorded but never move the deadline.
-- recorded_at is the database's own clock when the offer was written (the
-- moment other workers can see it), beside "at", the caller's clock.
ALTER TABLE scope_deferral_extensions
    ADD COLUMN observe_only boolean NOT NULL DEFAULT false,
    ADD COLUMN recorded_at  timestamptz NOT NULL DEFAULT clock_timestamp();
ALTER TABLE scope_deferral_extensions
    DROP CONSTRAINT scope_deferral_extensions_scope_fkey;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE scope_deferral_extensions DROP COLUMN observe_only, DROP COLUMN recorded_at;
ALTER TABLE scope_deferral_extensions
    ADD CONSTRAINT scope_deferral_extensions_scope_fkey FOREIGN KEY (scope) REFERENCES scope_deferrals (scope) NOT VALID;
ALTER TABLE scope_deferrals
    DROP COLUMN needs_probe, DROP COLUMN probe_job_id, DROP COLUMN probe_claimed_at,
    DROP COLUMN paused, DROP COLUMN paused_reason, DROP COLUMN paused_at;

CREATE OR REPLACE FUNCTION ledger_retention_purge(cutoff timestamptz, purge_at timestamptz, max_recordings integer, purge_reason text)
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

CREATE OR REPLACE FUNCTION recording_event_guard() RETURNS trigger LANGUAGE plpgsql AS $$
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

DROP TABLE transcripts;
DELETE FROM recording_state_edges WHERE (from_state, to_state) IN (('expired', 'eligible'), ('failed', 'eligible'));
DROP INDEX recordings_deadline_open;
ALTER TABLE recordings
    DROP COLUMN provider, DROP COLUMN provider_id, DROP COLUMN model, DROP COLUMN language,
    DROP COLUMN not_before, DROP COLUMN started_at;
-- +goose StatementEnd
