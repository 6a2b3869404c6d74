-- RiverDepth: jobs waiting in each River queue by state (available: ready
-- now; scheduled: snoozed or scheduled for later; retryable: failed, to be
-- retried), every known queue and state included with 0.
SELECT q.queue, s.state, count(j.id) AS jobs
FROM (SELECT name AS queue FROM river_queue UNION SELECT DISTINCT queue FROM river_job
      WHERE state IN ('available', 'scheduled', 'retryable')) AS q
CROSS JOIN (VALUES ('available'), ('scheduled'), ('retryable')) AS s (state)
LEFT JOIN river_job j ON j.queue = q.queue AND j.state = s.state::river_job_state
GROUP BY q.queue, s.state
ORDER BY q.queue, s.state;
