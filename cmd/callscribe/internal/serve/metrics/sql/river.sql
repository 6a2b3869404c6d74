-- RiverDepth: jobs waiting in each River queue by state, for the states
-- $1 (available: ready now; scheduled: snoozed or scheduled for later;
-- retryable: failed, to be retried), every known queue and state included
-- with 0.
SELECT q.queue, s.state, count(j.id) AS jobs
FROM (SELECT name AS queue FROM river_queue UNION SELECT DISTINCT queue FROM river_job
      WHERE state = ANY ($1::text[]::river_job_state[])) AS q
CROSS JOIN unnest($1::text[]) AS s (state)
LEFT JOIN river_job j ON j.queue = q.queue AND j.state = s.state::river_job_state
GROUP BY q.queue, s.state
ORDER BY q.queue, s.state;
