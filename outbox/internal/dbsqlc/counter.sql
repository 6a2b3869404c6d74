-- Counters and gauges the operators watch.

-- name: CounterAdd :exec
INSERT INTO counters (name, value) VALUES (@name, @delta)
ON CONFLICT (name) DO UPDATE SET value = counters.value + EXCLUDED.value;

-- name: CounterList :many
SELECT name, value FROM counters ORDER BY name;

-- name: CounterGet :one
-- Zero for a counter never written.
SELECT coalesce((SELECT value FROM counters WHERE name = @name), 0)::bigint AS value;
