-- name: RetentionPurgeBatch :one
-- One batch of the retention purge (see ledger_retention_purge_batch in the
-- migrations): the only path by which events and the rest of a history are
-- ever deleted. Tenants and cutoffs are parallel arrays; default_cutoff is
-- every other tenant's.
SELECT purge_id::bigint AS purge_id, recordings_deleted::integer AS recordings_deleted,
       events_deleted::integer AS events_deleted, transcripts_deleted::integer AS transcripts_deleted,
       action_sets_deleted::integer AS action_sets_deleted, outbox_deleted::integer AS outbox_deleted,
       outbox_events_deleted::integer AS outbox_events_deleted, extensions_deleted::integer AS extensions_deleted,
       victim_ids::uuid[] AS victim_ids, victim_tenants::text[] AS victim_tenants, victim_audio::text[] AS victim_audio
FROM ledger_retention_purge_batch(@tenants::text[], @cutoffs::timestamptz[], @default_cutoff::timestamptz,
                                  @at::timestamptz, @max_recordings::integer, @reason::text, @policy::jsonb);

-- name: RetentionPreview :many
-- What the purge would remove now, per tenant.
SELECT tenant_id::text AS tenant_id, recordings::integer AS recordings, events::integer AS events,
       transcripts::integer AS transcripts, action_sets::integer AS action_sets, outbox_rows::integer AS outbox_rows,
       outbox_events::integer AS outbox_events, extensions::integer AS extensions,
       audio_objects::integer AS audio_objects, oldest::timestamptz AS oldest
FROM ledger_retention_preview(@tenants::text[], @cutoffs::timestamptz[], @default_cutoff::timestamptz);

-- name: AudioInUse :one
-- Whether any recording still names the audio object.
SELECT EXISTS (SELECT 1 FROM recordings WHERE audio_uri = @audio_uri::text) AS in_use;

-- name: RetentionAudioRecord :exec
INSERT INTO retention_audio (purge_id, recording_id, tenant_id, audio_uri, outcome, detail, at)
VALUES (@purge_id::bigint, @recording_id::uuid, @tenant_id::text, @audio_uri::text, @outcome::text, @detail::text, @at::timestamptz);

-- name: RetentionPurgeList :many
SELECT * FROM retention_purges ORDER BY id DESC LIMIT @max_rows::integer;
