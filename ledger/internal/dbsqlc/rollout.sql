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

-- name: RolloutSubmissions :one
-- For recordings of tenants, since a time: the submissions (events that
-- record one: they carry the probe flag), those that went out while a
-- deadline the platform had recorded for their scope was still ahead
-- (inside a cooldown it knew of when it asked for admission: the event's
-- admitted_at), and how many of each were answered 429.
WITH subs AS (
    SELECT e.recording_id, e.seq, coalesce((e.detail->>'admitted_at')::timestamptz, e.at) AS at, e.detail->>'scope' AS scope
    FROM recording_events e JOIN recordings r ON r.id = e.recording_id
    WHERE r.tenant_id = ANY (@tenants::text[]) AND e.at >= @since::timestamptz
      AND e.detail->>'probe' IS NOT NULL
), inside AS (
    SELECT s.* FROM subs s
    WHERE EXISTS (SELECT 1 FROM scope_deferral_extensions x
                  WHERE x.scope = s.scope AND x.recorded_at <= s.at AND x.offered_not_before > s.at)
)
SELECT (SELECT count(*) FROM subs)::bigint AS submissions,
       (SELECT count(*) FROM inside)::bigint AS inside_known_cooldown,
       (SELECT count(*) FROM subs s JOIN recording_events n ON n.recording_id = s.recording_id AND n.seq = s.seq + 1
         WHERE n.response_class = 'rate_limited')::bigint AS throttled,
       (SELECT count(*) FROM inside i JOIN recording_events n ON n.recording_id = i.recording_id AND n.seq = i.seq + 1
         WHERE n.response_class = 'rate_limited')::bigint AS throttled_inside;
