-- Revocations of API tokens are pushed to every serve process: each keeps
-- the tokens it has seen in memory, so that the capacity API never waits on
-- PostgreSQL, and LISTENs on api_token_revoked for the ones it must drop.
-- The trigger notifies on any revocation, whoever makes it (`callscribe
-- tokens revoke` in another process, an operator's UPDATE), after the
-- transaction commits; the payload is the token's id. A process that missed
-- a notice (its connection was down) re-reads every token when it listens
-- again and every tokens.refresh_every besides.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION api_token_notify_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('api_token_revoked', NEW.id::text);
    RETURN NULL;
END
$$;

-- Pinned search_path, as every function of the schema (migration 00014).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION api_token_notify_revoked() SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

CREATE TRIGGER api_token_notify_revoked AFTER UPDATE OF revoked_at ON api_tokens
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION api_token_notify_revoked();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER api_token_notify_revoked ON api_tokens;
DROP FUNCTION api_token_notify_revoked();
-- +goose StatementEnd
