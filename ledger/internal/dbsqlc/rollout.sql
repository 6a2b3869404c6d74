-- name: RolloutSet :one
-- Sets a cohort's mode and records the change, in one statement.
WITH prior AS (
    SELECT mode FROM rollout_cohorts WHERE cohort = @cohort::text
), up AS (
    INSERT INTO rollout_cohorts AS c (cohort, mode, reason, updated_at)
    VALUES (@cohort::text, @mode::text, @reason::text, @at::timestamptz)
    ON CONFLICT (cohort) DO UPDATE SET mode = EXCLUDED.mode, reason = EXCLUDED.reason, updated_at = EXCLUDED.updated_at
    RETURNING c.cohort, c.mode, c.reason, c.updated_at
), ev AS (
    INSERT INTO rollout_events (cohort, prior_mode, mode, reason, at)
    SELECT up.cohort, (SELECT mode FROM prior), up.mode, up.reason, up.updated_at FROM up
)
SELECT cohort, mode, reason, updated_at FROM up;

-- name: RolloutList :many
SELECT * FROM rollout_cohorts ORDER BY cohort;
