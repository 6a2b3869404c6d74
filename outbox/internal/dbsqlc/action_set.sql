-- Committed action sets: append-only, unique on (tenant, call, version).

-- name: ActionSetInsert :one
-- No row: another worker committed this version first.
INSERT INTO action_sets (recording_id, tenant_id, call_id, action_version, recording_sha256, actions, committed_at)
VALUES (@recording_id, @tenant_id, @call_id, @action_version, @recording_sha256, @actions, @committed_at)
ON CONFLICT ON CONSTRAINT action_sets_version DO NOTHING
RETURNING id;

-- name: ActionSetCountOtherRecordings :one
-- The versions the call's other recordings (other audio digests) committed.
SELECT count(*) FROM action_sets
WHERE tenant_id = @tenant_id AND call_id = @call_id AND recording_id <> @recording_id;

-- name: ActionSetGetByVersion :one
SELECT * FROM action_sets
WHERE tenant_id = @tenant_id AND call_id = @call_id AND action_version = @action_version;

-- name: ActionSetListByRecording :many
SELECT * FROM action_sets WHERE recording_id = @recording_id ORDER BY action_version;
