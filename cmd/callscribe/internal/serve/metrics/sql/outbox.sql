-- OutboxBacklog: pending and dead rows, and the age in seconds at $1 of the
-- oldest pending row (0 when none is pending).
SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'dead') AS dead,
       COALESCE(EXTRACT(EPOCH FROM ($1::timestamptz - min(created_at) FILTER (WHERE state = 'pending'))), 0)::float8 AS oldest_pending_seconds
FROM outbox
WHERE state IN ('pending', 'dead');
