-- name: TokenInsert :one
INSERT INTO api_tokens (name, tenant_id, admin, secret_sha256, created_at)
VALUES (@name::text, sqlc.narg(tenant_id)::text, @admin::boolean, @secret_sha256::bytea, @created_at::timestamptz)
RETURNING *;

-- name: TokenGet :one
SELECT * FROM api_tokens WHERE id = @id;

-- name: TokenList :many
SELECT * FROM api_tokens ORDER BY id;

-- name: TokenRevoke :one
UPDATE api_tokens SET revoked_at = @at::timestamptz WHERE id = @id AND revoked_at IS NULL RETURNING *;
