-- API tokens of `callscribe serve`: a token names a tenant (its
-- organisation in the capacity API) or is an admin token. Only the SHA-256
-- of its secret is stored; the token itself is printed once, at creation.
-- Tokens are revoked, never deleted or changed otherwise: the table is the
-- record of who could call the API when.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE api_tokens (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL DEFAULT '' CHECK (length(name) <= 128),
    tenant_id     text CHECK (tenant_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    admin         boolean NOT NULL DEFAULT false,
    secret_sha256 bytea NOT NULL CHECK (length(secret_sha256) = 32),
    created_at    timestamptz NOT NULL,
    revoked_at    timestamptz,
    CONSTRAINT api_tokens_kind CHECK ((tenant_id IS NULL) = admin)
);

CREATE FUNCTION api_token_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL
       AND NEW.id = OLD.id AND NEW.name = OLD.name AND NEW.tenant_id IS NOT DISTINCT FROM OLD.tenant_id
       AND NEW.admin = OLD.admin AND NEW.secret_sha256 = OLD.secret_sha256 AND NEW.created_at = OLD.created_at THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'api_tokens: % refused (a token is only ever revoked)', TG_OP USING ERRCODE = 'CS002';
END
$$;

CREATE TRIGGER api_token_guard BEFORE UPDATE OR DELETE ON api_tokens
    FOR EACH ROW EXECUTE FUNCTION api_token_guard();
CREATE TRIGGER api_tokens_no_truncate BEFORE TRUNCATE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE api_tokens;
DROP FUNCTION api_token_guard();
-- +goose StatementEnd
