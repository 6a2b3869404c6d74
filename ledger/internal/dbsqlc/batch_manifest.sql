-- name: BatchCandidates :many
-- Eligible batch recordings of tenants that no manifest holds pending,
-- oldest first, locked for the caller's transaction (others skip them).
SELECT r.* FROM recordings r
WHERE r.state = 'eligible' AND r.lane = 'batch' AND r.tenant_id = ANY (@tenants::text[])
  AND NOT EXISTS (SELECT 1 FROM batch_manifest_items i WHERE i.recording_id = r.id AND i.state = 'pending')
ORDER BY r.updated_at, r.id
LIMIT @max_rows::integer
FOR UPDATE OF r SKIP LOCKED;

-- name: BatchLastResubmitted :many
-- For each of the recordings, the latest manifest that sent it back
-- (item state resubmit), if any, with that manifest's state.
SELECT DISTINCT ON (i.recording_id) i.recording_id, i.manifest_id, m.state AS manifest_state
FROM batch_manifest_items i JOIN batch_manifests m ON m.id = i.manifest_id
WHERE i.recording_id = ANY (@recording_ids::uuid[]) AND i.state = 'resubmit'
ORDER BY i.recording_id, m.created_at DESC;

-- name: BatchManifestInsert :one
-- A manifest, its items and its first event, in one statement.
WITH m AS (
    INSERT INTO batch_manifests (id, manifest_key, tenant_id, provider, model, scope, state, items, audio_seconds,
                                 resubmission_of, created_at, updated_at)
    VALUES (@id, @manifest_key::text, @tenant_id::text, @provider::text, @model::text, @scope::text, 'formed',
            cardinality(@recording_ids::uuid[]), @audio_seconds::double precision, sqlc.narg(resubmission_of)::uuid, @at, @at)
    RETURNING *
), items AS (
    INSERT INTO batch_manifest_items (manifest_id, recording_id, business_key, position, state, updated_at)
    SELECT m.id, x.recording_id, (@business_keys::text[])[x.position], x.position::integer, 'pending', @at
    FROM m, unnest(@recording_ids::uuid[]) WITH ORDINALITY AS x(recording_id, position)
), ev AS (
    INSERT INTO batch_manifest_events (manifest_id, at, kind, reason, detail)
    SELECT m.id, @at, 'formed', @reason::text, @detail::jsonb FROM m
)
SELECT * FROM m;

-- name: BatchManifestGet :one
SELECT * FROM batch_manifests WHERE id = @id;

-- name: BatchManifestGetByKey :one
SELECT * FROM batch_manifests WHERE manifest_key = @manifest_key::text;

-- name: BatchManifestList :many
-- Manifests, newest first, optionally of one state and one tenant.
SELECT * FROM batch_manifests
WHERE (sqlc.narg(state)::text IS NULL OR state = sqlc.narg(state)::text)
  AND (sqlc.narg(tenant_id)::text IS NULL OR tenant_id = sqlc.narg(tenant_id)::text)
ORDER BY created_at DESC, id DESC
LIMIT @max_rows::integer;

-- name: BatchManifestItems :many
SELECT * FROM batch_manifest_items WHERE manifest_id = @manifest_id ORDER BY position;

-- name: BatchManifestEvents :many
SELECT * FROM batch_manifest_events WHERE manifest_id = @manifest_id ORDER BY id;

-- name: BatchManifestMove :one
-- A compare-and-set of the manifest's state (the vendor's batch id kept
-- unless given) and the event that records it. No row: not in from_state.
WITH upd AS (
    UPDATE batch_manifests
    SET state = @to_state::text, updated_at = @at,
        vendor_batch_id = COALESCE(sqlc.narg(vendor_batch_id)::text, vendor_batch_id)
    WHERE batch_manifests.id = @id AND batch_manifests.state = @from_state::text
    RETURNING *
), ev AS (
    INSERT INTO batch_manifest_events (manifest_id, at, kind, reason, detail)
    SELECT upd.id, @at, @kind::text, @reason::text, @detail::jsonb FROM upd
)
SELECT * FROM upd;

-- name: BatchManifestNote :exec
-- An event that moves nothing (a poll, a throttled request).
INSERT INTO batch_manifest_events (manifest_id, at, kind, reason, detail)
VALUES (@manifest_id, @at, @kind::text, @reason::text, @detail::jsonb);

-- name: BatchItemSettle :one
-- A pending item's outcome. No row: it was not pending.
UPDATE batch_manifest_items
SET state = @state::text, provider_id = COALESCE(sqlc.narg(provider_id)::text, provider_id), reason = @reason::text, updated_at = @at
WHERE manifest_id = @manifest_id AND recording_id = @recording_id AND state = 'pending'
RETURNING *;

-- name: BatchItemsOfRecording :many
-- The manifests a recording was in, oldest first, with their keys.
SELECT i.*, m.manifest_key, m.state AS manifest_state, m.vendor_batch_id
FROM batch_manifest_items i JOIN batch_manifests m ON m.id = i.manifest_id
WHERE i.recording_id = @recording_id
ORDER BY m.created_at, m.id;

-- name: BatchManifestCounts :many
-- Manifests by state, with their items.
SELECT state, count(*)::bigint AS manifests, coalesce(sum(items), 0)::bigint AS items
FROM batch_manifests GROUP BY state ORDER BY state;

-- name: BatchLaneCounts :many
-- The batch lane at a glance, one row per kind and state: manifests by
-- state (kind manifest), their items by state (kind item), and the done
-- manifests that did not complete every item on their own (kind partial,
-- state done: some item failed, was sent back or dropped).
SELECT 'manifest'::text AS kind, state, count(*)::bigint AS n FROM batch_manifests GROUP BY state
UNION ALL
SELECT 'item', state, count(*) FROM batch_manifest_items GROUP BY state
UNION ALL
SELECT 'partial', 'done', count(*) FROM batch_manifests m
WHERE m.state = 'done' AND EXISTS (SELECT 1 FROM batch_manifest_items i WHERE i.manifest_id = m.id AND i.state <> 'completed');
