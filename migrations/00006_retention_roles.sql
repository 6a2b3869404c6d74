-- Retention that removes a recording's whole footprint, and guards that
-- trust roles, not session settings.
--
-- The purge is one SECURITY DEFINER function. When `callscribe migrate up`
-- can create roles it makes the function's owner the role
-- callscribe_purge, which no login holds; the runtime role
-- (callscribe_runtime) may only call it. A guard lets a deletion through
-- only while that function runs: the current user must be the function's
-- owner AND the function must have said so in a transaction-local setting.
-- A session that sets the setting itself is still refused (it is not the
-- owner). Where roles cannot be created (managed PostgreSQL), the function
-- stays owned by the migrating user and the grants to run by hand are in
-- docs/operations.md.

-- +goose Up
-- +goose StatementBegin

-- Each batch now records what it removed, table by table; its tenant
-- policy; and each audio object's fate in retention_audio.
ALTER TABLE retention_purges
    ADD COLUMN transcripts_deleted    integer NOT NULL DEFAULT 0,
    ADD COLUMN action_sets_deleted    integer NOT NULL DEFAULT 0,
    ADD COLUMN outbox_deleted         integer NOT NULL DEFAULT 0,
    ADD COLUMN outbox_events_deleted  integer NOT NULL DEFAULT 0,
    ADD COLUMN extensions_deleted     integer NOT NULL DEFAULT 0,
    ADD COLUMN policy                 jsonb NOT NULL DEFAULT '{}'::jsonb;

CREATE TABLE retention_audio (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    purge_id     bigint NOT NULL REFERENCES retention_purges (id),
    recording_id uuid NOT NULL,
    tenant_id    text NOT NULL,
    audio_uri    text NOT NULL,
    -- deleted, kept (by policy), shared (another recording still uses
    -- it), missing (already gone), failed (see detail; tried again by
    -- nobody: an operator removes it)
    outcome      text NOT NULL CHECK (outcome IN ('deleted', 'kept', 'shared', 'missing', 'failed')),
    detail       text NOT NULL DEFAULT '',
    at           timestamptz NOT NULL
);

CREATE TRIGGER retention_audio_append_only
    BEFORE UPDATE OR DELETE ON retention_audio
    FOR EACH ROW EXECUTE FUNCTION append_only();
CREATE TRIGGER retention_audio_no_truncate
    BEFORE TRUNCATE ON retention_audio
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();

-- The purge's victims: terminal recordings last changed before their
-- tenant's cutoff (default_cutoff for a tenant without its own: none is
-- kept forever by omission), with no delivery still pending.
CREATE FUNCTION ledger_retention_candidates(tenants text[], cutoffs timestamptz[], default_cutoff timestamptz)
    RETURNS TABLE (id uuid, tenant_id text, audio_uri text, updated_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT r.id, r.tenant_id, r.audio_uri, r.updated_at
    FROM recordings r
    JOIN recording_states s ON s.name = r.state
    LEFT JOIN unnest(tenants, cutoffs) AS p(tenant, cutoff) ON p.tenant = r.tenant_id
    WHERE s.terminal
      AND r.updated_at < coalesce(p.cutoff, default_cutoff)
      AND NOT EXISTS (SELECT 1 FROM action_sets a JOIN outbox o ON o.action_set_id = a.id
                      WHERE a.recording_id = r.id AND o.state = 'pending')
$$;

-- What the purge would remove now, per tenant (callscribe retention run
-- --dry-run): nothing is locked or changed.
CREATE FUNCTION ledger_retention_preview(tenants text[], cutoffs timestamptz[], default_cutoff timestamptz)
    RETURNS TABLE (tenant_id text, recordings integer, events integer, transcripts integer, action_sets integer,
                   outbox_rows integer, outbox_events integer, extensions integer, audio_objects integer,
                   oldest timestamptz)
    LANGUAGE sql STABLE AS $$
    WITH c AS (SELECT * FROM ledger_retention_candidates(tenants, cutoffs, default_cutoff)),
    sets AS (SELECT a.id, c.tenant_id FROM action_sets a JOIN c ON c.id = a.recording_id),
    rows_out AS (SELECT o.id, sets.tenant_id FROM outbox o JOIN sets ON sets.id = o.action_set_id)
    SELECT c.tenant_id,
           count(*)::integer,
           (SELECT count(*) FROM recording_events e JOIN c c2 ON c2.id = e.recording_id WHERE c2.tenant_id = c.tenant_id)::integer,
           (SELECT count(*) FROM transcripts t JOIN c c2 ON c2.id = t.recording_id WHERE c2.tenant_id = c.tenant_id)::integer,
           (SELECT count(*) FROM sets WHERE sets.tenant_id = c.tenant_id)::integer,
           (SELECT count(*) FROM rows_out WHERE rows_out.tenant_id = c.tenant_id)::integer,
           (SELECT count(*) FROM outbox_events oe JOIN rows_out ON rows_out.id = oe.outbox_id
             WHERE rows_out.tenant_id = c.tenant_id)::integer,
           (SELECT count(*) FROM scope_deferral_extensions x JOIN c c2 ON c2.id = x.recording_id
             WHERE c2.tenant_id = c.tenant_id)::integer,
           count(DISTINCT nullif(c.audio_uri, ''))::integer,
           min(c.updated_at)
    FROM c
    GROUP BY c.tenant_id
    ORDER BY c.tenant_id
$$;

-- One batch of the purge: at most max_recordings victims, their whole
-- footprint, and the batch's record. Returns the counts, the batch's id,
-- and the victims' audio (recording, tenant, audio key) for the caller to
-- remove from the blob store after commit.
CREATE FUNCTION ledger_retention_purge_batch(tenants text[], cutoffs timestamptz[], default_cutoff timestamptz,
                                             purge_at timestamptz, max_recordings integer, purge_reason text, policy jsonb)
    RETURNS TABLE (purge_id bigint, recordings_deleted integer, events_deleted integer, transcripts_deleted integer,
                   action_sets_deleted integer, outbox_deleted integer, outbox_events_deleted integer,
                   extensions_deleted integer, victim_ids uuid[], victim_tenants text[], victim_audio text[])
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path FROM CURRENT AS $$
DECLARE
    victims uuid[];
    tens text[];
    uris text[];
    sets bigint[];
    rows_out bigint[];
    n_rec integer; n_ev integer; n_tr integer; n_as integer; n_ob integer; n_oe integer; n_ext integer;
    pid bigint;
BEGIN
    IF max_recordings IS NULL OR max_recordings < 1 THEN
        RAISE EXCEPTION 'max_recordings must be positive' USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(array_agg(v.id ORDER BY v.updated_at), '{}'), coalesce(array_agg(v.tenant_id ORDER BY v.updated_at), '{}'),
           coalesce(array_agg(v.audio_uri ORDER BY v.updated_at), '{}')
      INTO victims, tens, uris
      FROM (SELECT c.id, c.tenant_id, c.audio_uri, c.updated_at
            FROM ledger_retention_candidates(tenants, cutoffs, default_cutoff) c
            JOIN recordings r ON r.id = c.id
            ORDER BY c.updated_at
            LIMIT max_recordings
            FOR UPDATE OF r SKIP LOCKED) v;

    SELECT coalesce(array_agg(a.id), '{}') INTO sets FROM action_sets a WHERE a.recording_id = ANY (victims);
    SELECT coalesce(array_agg(o.id), '{}') INTO rows_out FROM outbox o WHERE o.action_set_id = ANY (sets);

    PERFORM set_config('callscribe.retention_purge', 'on', true);
    DELETE FROM outbox_events WHERE outbox_id = ANY (rows_out);
    GET DIAGNOSTICS n_oe = ROW_COUNT;
    DELETE FROM outbox WHERE id = ANY (rows_out);
    GET DIAGNOSTICS n_ob = ROW_COUNT;
    DELETE FROM action_sets WHERE id = ANY (sets);
    GET DIAGNOSTICS n_as = ROW_COUNT;
    DELETE FROM transcripts WHERE recording_id = ANY (victims);
    GET DIAGNOSTICS n_tr = ROW_COUNT;
    DELETE FROM scope_deferral_extensions WHERE recording_id = ANY (victims);
    GET DIAGNOSTICS n_ext = ROW_COUNT;
    DELETE FROM recording_events WHERE recording_id = ANY (victims);
    GET DIAGNOSTICS n_ev = ROW_COUNT;
    DELETE FROM recordings WHERE id = ANY (victims);
    GET DIAGNOSTICS n_rec = ROW_COUNT;
    PERFORM set_config('callscribe.retention_purge', 'off', true);

    INSERT INTO retention_purges (at, cutoff, recordings_deleted, events_deleted, reason, transcripts_deleted,
                                  action_sets_deleted, outbox_deleted, outbox_events_deleted, extensions_deleted, policy)
    VALUES (purge_at, default_cutoff, n_rec, n_ev, purge_reason, n_tr, n_as, n_ob, n_oe, n_ext, coalesce(policy, '{}'::jsonb))
    RETURNING id INTO pid;

    RETURN QUERY SELECT pid, n_rec, n_ev, n_tr, n_as, n_ob, n_oe, n_ext, victims, tens, uris;
END
$$;

-- The old single-cutoff purge removed events and rows only (and failed on
-- a committed recording's action sets): gone.
DROP FUNCTION ledger_retention_purge(timestamptz, timestamptz, integer, text);

-- Whether the retention purge is running in this transaction: the setting
-- it sets, and the current user being the purge function's owner (inside
-- a SECURITY DEFINER function, the current user is its owner). A session
-- that sets the setting itself is not that owner.
CREATE FUNCTION callscribe_purging() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('callscribe.retention_purge', true), '') = 'on'
       AND current_user = (SELECT pg_get_userbyid(p.proowner) FROM pg_proc p
                           WHERE p.oid = 'ledger_retention_purge_batch(text[], timestamptz[], timestamptz, timestamptz, integer, text, jsonb)'::regprocedure)
$$;

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

-- Rows removed only by the purge (transcripts, action sets, outbox rows and
-- their events, scope extensions): DELETE passes while the purge runs;
-- UPDATE of the immutable ones never does.
CREATE FUNCTION purge_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND callscribe_purging() THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only: % refused (only the retention purge removes rows)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'CS002';
END
$$;

CREATE TRIGGER transcripts_purge_only BEFORE UPDATE OR DELETE ON transcripts
    FOR EACH ROW EXECUTE FUNCTION purge_only();

DROP TRIGGER action_sets_append_only ON action_sets;
CREATE TRIGGER action_sets_purge_only BEFORE UPDATE OR DELETE ON action_sets
    FOR EACH ROW EXECUTE FUNCTION purge_only();

DROP TRIGGER outbox_events_append_only ON outbox_events;
CREATE TRIGGER outbox_events_purge_only BEFORE UPDATE OR DELETE ON outbox_events
    FOR EACH ROW EXECUTE FUNCTION purge_only();

-- The outbox row itself changes (its state machine, outbox_guard) but is
-- removed only by the purge.
CREATE TRIGGER outbox_purge_only BEFORE DELETE ON outbox
    FOR EACH ROW EXECUTE FUNCTION purge_only();

DROP TRIGGER scope_deferral_extensions_append_only ON scope_deferral_extensions;
CREATE TRIGGER scope_deferral_extensions_purge_only BEFORE UPDATE OR DELETE ON scope_deferral_extensions
    FOR EACH ROW EXECUTE FUNCTION purge_only();

-- No TRUNCATE of any of them (TRUNCATE ... CASCADE would reach the rest).
CREATE TRIGGER recordings_no_truncate BEFORE TRUNCATE ON recordings
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE TRIGGER transcripts_no_truncate BEFORE TRUNCATE ON transcripts
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE TRIGGER action_sets_no_truncate BEFORE TRUNCATE ON action_sets
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE TRIGGER outbox_no_truncate BEFORE TRUNCATE ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE TRIGGER outbox_events_no_truncate BEFORE TRUNCATE ON outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();

-- The state machine changes only by migration: its tables take no UPDATE,
-- DELETE or TRUNCATE (and the runtime role no INSERT, see the grants).
CREATE TRIGGER recording_states_fixed BEFORE UPDATE OR DELETE ON recording_states
    FOR EACH ROW EXECUTE FUNCTION append_only();
CREATE TRIGGER recording_states_no_truncate BEFORE TRUNCATE ON recording_states
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE TRIGGER recording_state_edges_fixed BEFORE UPDATE OR DELETE ON recording_state_edges
    FOR EACH ROW EXECUTE FUNCTION append_only();
CREATE TRIGGER recording_state_edges_no_truncate BEFORE TRUNCATE ON recording_state_edges
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER recording_state_edges_no_truncate ON recording_state_edges;
DROP TRIGGER recording_state_edges_fixed ON recording_state_edges;
DROP TRIGGER recording_states_no_truncate ON recording_states;
DROP TRIGGER recording_states_fixed ON recording_states;
DROP TRIGGER outbox_events_no_truncate ON outbox_events;
DROP TRIGGER outbox_no_truncate ON outbox;
DROP TRIGGER action_sets_no_truncate ON action_sets;
DROP TRIGGER transcripts_no_truncate ON transcripts;
DROP TRIGGER recordings_no_truncate ON recordings;
DROP TRIGGER scope_deferral_extensions_purge_only ON scope_deferral_extensions;
CREATE TRIGGER scope_deferral_extensions_append_only BEFORE UPDATE OR DELETE ON scope_deferral_extensions
    FOR EACH ROW EXECUTE FUNCTION append_only();
DROP TRIGGER outbox_purge_only ON outbox;
DROP TRIGGER outbox_events_purge_only ON outbox_events;
CREATE TRIGGER outbox_events_append_only BEFORE UPDATE OR DELETE ON outbox_events
    FOR EACH ROW EXECUTE FUNCTION append_only();
DROP TRIGGER action_sets_purge_only ON action_sets;
CREATE TRIGGER action_sets_append_only BEFORE UPDATE OR DELETE ON action_sets
    FOR EACH ROW EXECUTE FUNCTION append_only();
DROP TRIGGER transcripts_purge_only ON transcripts;
DROP FUNCTION purge_only();

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
        IF coalesce(current_setting('callscribe.retention_purge', true), '') <> 'on'
           OR NOT (SELECT terminal FROM recording_states WHERE name = OLD.state) THEN
            RAISE EXCEPTION 'recording % (state %) may only be removed by the retention purge of terminal histories',
                OLD.id, OLD.state USING ERRCODE = 'CS002';
        END IF;
        RETURN OLD;
    END IF;
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

DROP FUNCTION callscribe_purging();

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
    DELETE FROM transcripts WHERE recording_id = ANY (victims);
    DELETE FROM recordings WHERE id = ANY (victims);
    GET DIAGNOSTICS n_rec = ROW_COUNT;
    PERFORM set_config('callscribe.retention_purge', 'off', true);
    INSERT INTO retention_purges (at, cutoff, recordings_deleted, events_deleted, reason)
    VALUES (purge_at, cutoff, n_rec, n_ev, purge_reason);
    RETURN QUERY SELECT n_rec, n_ev;
END
$$;

DROP FUNCTION ledger_retention_purge_batch(text[], timestamptz[], timestamptz, timestamptz, integer, text, jsonb);
DROP FUNCTION ledger_retention_preview(text[], timestamptz[], timestamptz);
DROP FUNCTION ledger_retention_candidates(text[], timestamptz[], timestamptz);
DROP TABLE retention_audio;
ALTER TABLE retention_purges
    DROP COLUMN transcripts_deleted, DROP COLUMN action_sets_deleted, DROP COLUMN outbox_deleted,
    DROP COLUMN outbox_events_deleted, DROP COLUMN extensions_deleted, DROP COLUMN policy;
-- +goose StatementEnd
