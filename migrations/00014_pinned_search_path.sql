-- The database decides what the retention purge may remove, whatever its
-- caller says, and no session can change the tables the guards read.
--
-- 1. Every function of callscribe's schema runs with a pinned search_path:
--    pg_catalog, the schema, then pg_temp. PostgreSQL searches a
--    session's temporary schema first unless the path names it: with the
--    old settings ("$user", public for the purge; none for the trigger
--    functions) a session could CREATE TEMP TABLE recording_states (every
--    state terminal) or recording_state_edges (any move legal) and the
--    purge and the guards read that instead. Temporary tables now come
--    last, after the real ones. A later migration that creates a function
--    must give it the same setting (SET search_path = pg_catalog, <schema>,
--    pg_temp); TestAttackEveryFunctionPinsSearchPath fails until it does.
--    The grants (roles/grants.sql) also take TEMPORARY on the database
--    away from PUBLIC.
--
-- 2. The purge no longer trusts its caller's clock. A batch is stamped with
--    the database's time (purge_at is ignored), and no recording changed
--    more recently than the retention floor is ever a candidate, whatever
--    cutoffs are passed: the floor is retention_floor.min_retention before
--    the database's now() (1 day unless the owner changes it). The table
--    is the owner's; the runtime and purge roles may only read it. An
--    operator sets it, as the user that migrated, with
--        UPDATE retention_floor SET min_retention = interval '7 days', updated_at = now();
--    A tenant whose configured retention is shorter than the floor keeps
--    its histories until the floor has passed; the batch's audit row
--    records the effective default cutoff.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE retention_floor (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    min_retention interval NOT NULL CHECK (min_retention >= interval '0'),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO retention_floor (min_retention) VALUES (interval '1 day');

-- The latest instant a purged history may have last changed: the floor
-- before the database's clock (1 day if the row is missing).
CREATE FUNCTION ledger_retention_floor() RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT now() - coalesce((SELECT min_retention FROM retention_floor), interval '1 day')
$$;

CREATE OR REPLACE FUNCTION ledger_retention_candidates(tenants text[], cutoffs timestamptz[], default_cutoff timestamptz)
    RETURNS TABLE (id uuid, tenant_id text, audio_uri text, updated_at timestamptz)
    LANGUAGE sql STABLE AS $$
    SELECT r.id, r.tenant_id, r.audio_uri, r.updated_at
    FROM recordings r
    JOIN recording_states s ON s.name = r.state
    LEFT JOIN unnest(tenants, cutoffs) AS p(tenant, cutoff) ON p.tenant = r.tenant_id
    WHERE s.terminal
      AND r.updated_at < coalesce(p.cutoff, default_cutoff)
      AND r.updated_at < ledger_retention_floor()
      AND NOT EXISTS (SELECT 1 FROM action_sets a JOIN outbox o ON o.action_set_id = a.id
                      WHERE a.recording_id = r.id AND o.state = 'pending')
$$;

CREATE OR REPLACE FUNCTION ledger_retention_purge_batch(tenants text[], cutoffs timestamptz[], default_cutoff timestamptz,
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
    -- purge_at is the caller's clock and is not trusted: the batch is
    -- stamped with the database's (now()). The cutoffs are floored by
    -- ledger_retention_candidates.
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
    -- Batch manifests: the victims' items, then every finished manifest
    -- left without items, with its events.
    DELETE FROM batch_manifest_items WHERE recording_id = ANY (victims);
    DELETE FROM batch_manifest_events e USING batch_manifests m
     WHERE e.manifest_id = m.id AND m.state IN ('done', 'unbatched')
       AND NOT EXISTS (SELECT 1 FROM batch_manifest_items i WHERE i.manifest_id = m.id);
    DELETE FROM batch_manifests m
     WHERE m.state IN ('done', 'unbatched')
       AND NOT EXISTS (SELECT 1 FROM batch_manifest_items i WHERE i.manifest_id = m.id);
    DELETE FROM recordings WHERE id = ANY (victims);
    GET DIAGNOSTICS n_rec = ROW_COUNT;
    PERFORM set_config('callscribe.retention_purge', 'off', true);

    INSERT INTO retention_purges (at, cutoff, recordings_deleted, events_deleted, reason, transcripts_deleted,
                                  action_sets_deleted, outbox_deleted, outbox_events_deleted, extensions_deleted, policy)
    VALUES (now(), least(default_cutoff, ledger_retention_floor()), n_rec, n_ev, purge_reason, n_tr, n_as, n_ob, n_oe, n_ext, coalesce(policy, '{}'::jsonb))
    RETURNING id INTO pid;

    RETURN QUERY SELECT pid, n_rec, n_ev, n_tr, n_as, n_ob, n_oe, n_ext, victims, tens, uris;
END
$$;

-- Pin every function of the schema (River's excepted: River owns them).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = current_schema() AND p.prokind IN ('f', 'p') AND p.proname NOT LIKE 'river\_%'
               AND NOT EXISTS (SELECT 1 FROM pg_depend d
                               WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e') LOOP
        EXECUTE format('ALTER ROUTINE %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = current_schema() AND p.prokind IN ('f', 'p') AND p.proname NOT LIKE 'river\_%'
               AND NOT EXISTS (SELECT 1 FROM pg_depend d
                               WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e') LOOP
        EXECUTE format('ALTER ROUTINE %s RESET search_path', f);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION ledger_retention_candidates(tenants text[], cutoffs timestamptz[], default_cutoff timestamptz)
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

CREATE OR REPLACE FUNCTION ledger_retention_purge_batch(tenants text[], cutoffs timestamptz[], default_cutoff timestamptz,
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
    -- Batch manifests: the victims' items, then every finished manifest
    -- left without items, with its events.
    DELETE FROM batch_manifest_items WHERE recording_id = ANY (victims);
    DELETE FROM batch_manifest_events e USING batch_manifests m
     WHERE e.manifest_id = m.id AND m.state IN ('done', 'unbatched')
       AND NOT EXISTS (SELECT 1 FROM batch_manifest_items i WHERE i.manifest_id = m.id);
    DELETE FROM batch_manifests m
     WHERE m.state IN ('done', 'unbatched')
       AND NOT EXISTS (SELECT 1 FROM batch_manifest_items i WHERE i.manifest_id = m.id);
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

DROP FUNCTION ledger_retention_floor();
DROP TABLE retention_floor;
-- +goose StatementEnd
