-- OldestEligibleByLane: per lane, the age in seconds at $1 of the oldest
-- recording waiting to be submitted (eligible, or in retry_wait with its
-- not_before passed), 0 when none waits.
SELECT l.lane,
       COALESCE(EXTRACT(EPOCH FROM ($1::timestamptz - min(r.created_at))), 0)::float8 AS age_seconds
FROM (VALUES ('immediate'), ('batch')) AS l (lane)
LEFT JOIN recordings r
       ON r.lane = l.lane
      AND (r.state = 'eligible' OR (r.state = 'retry_wait' AND (r.not_before IS NULL OR r.not_before <= $1::timestamptz)))
GROUP BY l.lane;
