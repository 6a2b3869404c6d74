-- name: RetentionPurge :one
-- One batch of the retention purge (see ledger_retention_purge in the
-- migrations): the only path by which events are ever deleted.
SELECT recordings_deleted::integer AS recordings_deleted, events_deleted::integer AS events_deleted
FROM ledger_retention_purge(@cutoff::timestamptz, @at::timestamptz, @max_recordings::integer, @reason::text);
