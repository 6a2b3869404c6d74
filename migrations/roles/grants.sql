-- The privileges of the runtime and purge roles on one callscribe database.
-- Run by `callscribe migrate up` after every migration (it is idempotent),
-- as the owner of the tables (the user that migrated). The migrating user
-- must be able to SET ROLE callscribe_purge to give it the purge function.
--
-- callscribe_runtime: SELECT and INSERT; UPDATE only of the columns the
-- state machines move; never DELETE, TRUNCATE, ALTER or DROP of callscribe's
-- tables. River's tables are River's: it inserts, updates and deletes jobs.
-- callscribe_purge: owns the purge function and may delete what it removes;
-- no login holds it.
DO $$
DECLARE
    t text;
    s text := current_schema();
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO callscribe_runtime, callscribe_purge', s);

    FOREACH t IN ARRAY ARRAY['recordings', 'recording_events', 'recording_states', 'recording_state_edges',
                             'transcripts', 'action_sets', 'outbox', 'outbox_events', 'counters',
                             'scope_deferrals', 'scope_deferral_extensions', 'retention_purges',
                             'retention_audio', 'callscribe_schema_version', 'api_tokens',
                             'rollout_cohorts', 'rollout_events', 'batch_manifests', 'batch_manifest_items',
                             'batch_manifest_events'] LOOP
        EXECUTE format('REVOKE ALL ON %I FROM callscribe_runtime, callscribe_purge', t);
        EXECUTE format('GRANT SELECT ON %I TO callscribe_runtime', t);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['recordings', 'recording_events', 'transcripts', 'action_sets', 'outbox',
                             'outbox_events', 'counters', 'scope_deferrals', 'scope_deferral_extensions',
                             'retention_audio', 'api_tokens', 'rollout_cohorts', 'rollout_events',
                             'batch_manifests', 'batch_manifest_items', 'batch_manifest_events'] LOOP
        EXECUTE format('GRANT INSERT ON %I TO callscribe_runtime', t);
    END LOOP;
    GRANT UPDATE (state, attempt, updated_at, last_event_seq, provider, provider_id, model, language,
                  not_before, started_at, deadline) ON recordings TO callscribe_runtime;
    GRANT UPDATE (state, attempts, crm_id, last_class, not_before, updated_at, deadline) ON outbox TO callscribe_runtime;
    GRANT UPDATE (not_before, updated_at, needs_probe, probe_job_id, probe_claimed_at, paused, paused_reason,
                  paused_at, seq) ON scope_deferrals TO callscribe_runtime;
    GRANT UPDATE (value) ON counters TO callscribe_runtime;
    GRANT UPDATE (revoked_at) ON api_tokens TO callscribe_runtime;
    GRANT UPDATE (mode, reason, updated_at) ON rollout_cohorts TO callscribe_runtime;
    GRANT UPDATE (state, vendor_batch_id, updated_at) ON batch_manifests TO callscribe_runtime;
    GRANT UPDATE (state, provider_id, reason, updated_at) ON batch_manifest_items TO callscribe_runtime;

    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = s AND c.relkind IN ('r', 'p') AND c.relname LIKE 'river\_%' LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO callscribe_runtime', t);
    END LOOP;
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = s AND c.relkind = 'S' AND c.relname LIKE 'river\_%' LOOP
        EXECUTE format('GRANT USAGE, SELECT, UPDATE ON SEQUENCE %I TO callscribe_runtime', t);
    END LOOP;

    -- The purge role removes a history's whole footprint and records it.
    FOREACH t IN ARRAY ARRAY['recordings', 'recording_events', 'transcripts', 'action_sets', 'outbox',
                             'outbox_events', 'scope_deferral_extensions', 'batch_manifests', 'batch_manifest_items',
                             'batch_manifest_events'] LOOP
        EXECUTE format('GRANT SELECT, DELETE ON %I TO callscribe_purge', t);
    END LOOP;
    GRANT SELECT ON recording_states TO callscribe_purge;
    GRANT SELECT, INSERT ON retention_purges TO callscribe_purge;
    GRANT UPDATE (updated_at) ON recordings TO callscribe_purge; -- SELECT ... FOR UPDATE needs it
    EXECUTE format('GRANT CREATE ON SCHEMA %I TO callscribe_purge', s); -- to own a function there

    ALTER FUNCTION ledger_retention_purge_batch(text[], timestamptz[], timestamptz, timestamptz, integer, text, jsonb)
        OWNER TO callscribe_purge;
    REVOKE ALL ON FUNCTION ledger_retention_purge_batch(text[], timestamptz[], timestamptz, timestamptz, integer, text, jsonb)
        FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION ledger_retention_purge_batch(text[], timestamptz[], timestamptz, timestamptz, integer, text, jsonb)
        TO callscribe_runtime;
END
$$;

-- Added by migration 00014 (pinned search_path, retention floor):
-- - retention_floor is the owner's: the runtime and purge roles read it.
-- - No TEMPORARY for PUBLIC on this database (the owner keeps it): the
--   runtime role cannot create temporary tables at all, a second line
--   behind the functions' pinned search_path. Skipped, with a warning,
--   when the migrating user may not change the database's privileges.
-- - API tokens are created by `callscribe tokens create`, as the owner:
--   the runtime role reads and revokes them but cannot mint one.
DO $$
BEGIN
    REVOKE INSERT ON api_tokens FROM callscribe_runtime;
    IF to_regclass('retention_floor') IS NOT NULL THEN
        REVOKE ALL ON retention_floor FROM callscribe_runtime, callscribe_purge;
        GRANT SELECT ON retention_floor TO callscribe_runtime, callscribe_purge;
    END IF;
    BEGIN
        EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
        EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO %I', current_database(), current_user);
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE WARNING 'callscribe: could not revoke TEMPORARY on database % from PUBLIC: %', current_database(), SQLERRM;
    END;
END
$$;

-- Added by migration 00015 (status page sessions): the runtime role reads
-- and records sessions; it deletes them only through the two functions,
-- one session by its id's hash (sign-out) or the expired ones.
DO $$
BEGIN
    IF to_regclass('statuspage_sessions') IS NOT NULL THEN
        REVOKE ALL ON statuspage_sessions FROM callscribe_runtime, callscribe_purge;
        GRANT SELECT, INSERT ON statuspage_sessions TO callscribe_runtime;
        REVOKE ALL ON FUNCTION statuspage_session_end(bytea) FROM PUBLIC;
        REVOKE ALL ON FUNCTION statuspage_sessions_prune() FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION statuspage_session_end(bytea), statuspage_sessions_prune() TO callscribe_runtime;
    END IF;
END
$$;

-- Added by migration 00016 (replay runs): the runtime role records runs,
-- their deliveries and tries, and moves only the columns their state
-- machines move; it deletes none of them.
DO $$
BEGIN
    IF to_regclass('replay_runs') IS NOT NULL THEN
        REVOKE ALL ON replay_runs, replay_deliveries, replay_tries FROM callscribe_runtime, callscribe_purge;
        GRANT SELECT, INSERT ON replay_runs, replay_deliveries, replay_tries TO callscribe_runtime;
        GRANT UPDATE (state, rate_tat, cursor_created_at, cursor_id, enumerated, redriven, reason, updated_at, finished_at)
            ON replay_runs TO callscribe_runtime;
        GRANT UPDATE (state, attempts, throttled, transient, outcome, last_class, crm_id, reason, not_before, updated_at)
            ON replay_deliveries TO callscribe_runtime;
        GRANT UPDATE (admitted_seq, admitted_at, answered_at, outcome, response_class, http_status) ON replay_tries TO callscribe_runtime;
    END IF;
END
$$;

-- Added by migration 00018 (organisation and campaign caps): the runtime
-- role (`callscribe orgs set`, serve's admin routes, and every serve
-- re-reading the caps) reads the caps, stores and changes them, and
-- records each change; it deletes none of them, and changes no recorded
-- change.
DO $$
BEGIN
    IF to_regclass('org_caps') IS NOT NULL THEN
        REVOKE ALL ON org_caps, campaign_caps, cap_changes FROM callscribe_runtime, callscribe_purge;
        GRANT SELECT, INSERT ON org_caps, campaign_caps, cap_changes TO callscribe_runtime;
        GRANT UPDATE (call_limit, reason, updated_by, updated_at) ON org_caps, campaign_caps TO callscribe_runtime;
    END IF;
END
$$;
