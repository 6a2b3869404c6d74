-- ScopeCooldowns: scopes whose deadline is still ahead at $1 (not paused),
-- and scopes paused until an operator resumes them.
SELECT count(*) FILTER (WHERE not_before > $1::timestamptz AND NOT paused) AS cooling,
       count(*) FILTER (WHERE paused) AS paused
FROM scope_deferrals;
