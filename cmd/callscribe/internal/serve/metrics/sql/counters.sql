-- Counters: the counters table (duplicate_key_conflicts, ...).
SELECT name, value FROM counters ORDER BY name;
