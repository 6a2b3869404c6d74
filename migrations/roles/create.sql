-- The roles of a callscribe database (cluster-wide in PostgreSQL). Run by
-- `callscribe migrate up` when its user may create roles; otherwise by a
-- database administrator, once per cluster.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'callscribe_runtime') THEN
        BEGIN
            CREATE ROLE callscribe_runtime NOLOGIN;
        EXCEPTION WHEN duplicate_object THEN NULL;
        END;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'callscribe_purge') THEN
        BEGIN
            CREATE ROLE callscribe_purge NOLOGIN;
        EXCEPTION WHEN duplicate_object THEN NULL;
        END;
    END IF;
    -- The migrating user hands the purge function to callscribe_purge,
    -- which takes membership.
    IF NOT pg_has_role(current_user, 'callscribe_purge', 'MEMBER') THEN
        EXECUTE format('GRANT callscribe_purge TO %I', current_user);
    END IF;
END
$$;
