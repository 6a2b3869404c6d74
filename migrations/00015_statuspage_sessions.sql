-- Sessions of the status page (package statuspage): a browser signed in at
-- /status/login with an admin token holds a random session id (32 bytes)
-- in its cookie. Only the id's SHA-256 is stored, with the token's id (0:
-- CALLSCRIBE_API_TOKEN, which has none) and the session's expiry, so that
-- every serve process knows the session and a sign-out ends it everywhere:
-- signing out deletes the row, and a copy of the cookie is refused from
-- then on.
--
-- Rows are deleted, never changed, and only through two functions the
-- runtime role may run (it may not DELETE from the table itself):
-- statuspage_session_end (one session, by its id's hash: the sign-out) and
-- statuspage_sessions_prune (every session expired by the database's
-- clock), which every sign-in calls first, so the table holds at most the
-- sessions started within one session lifetime (12 h).

-- +goose Up
-- +goose StatementBegin
CREATE TABLE statuspage_sessions (
    id_sha256  bytea PRIMARY KEY CHECK (length(id_sha256) = 32),
    token_id   bigint NOT NULL CHECK (token_id >= 0),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL CHECK (expires_at > created_at)
);
CREATE INDEX statuspage_sessions_expires_at ON statuspage_sessions (expires_at);

-- Ends one session: true when it was recorded.
CREATE FUNCTION statuspage_session_end(session_sha256 bytea) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER AS $$
    WITH ended AS (DELETE FROM statuspage_sessions WHERE id_sha256 = session_sha256 RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM ended)
$$;

-- Deletes the sessions expired by the database's clock (no caller's clock
-- can make it delete a live one) and returns how many.
CREATE FUNCTION statuspage_sessions_prune() RETURNS integer
    LANGUAGE sql SECURITY DEFINER AS $$
    WITH pruned AS (DELETE FROM statuspage_sessions WHERE expires_at < now() RETURNING 1)
    SELECT count(*)::integer FROM pruned
$$;

-- Pinned search_path, as every function of the schema (migration 00014).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION statuspage_session_end(bytea) SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION statuspage_sessions_prune() SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;
REVOKE ALL ON FUNCTION statuspage_session_end(bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION statuspage_sessions_prune() FROM PUBLIC;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP FUNCTION statuspage_sessions_prune();
DROP FUNCTION statuspage_session_end(bytea);
DROP TABLE statuspage_sessions;
-- +goose StatementEnd
