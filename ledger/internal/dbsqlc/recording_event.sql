-- The append-only history of recordings.

-- name: RecordingEventList :many
SELECT * FROM recording_events
WHERE recording_id = @recording_id
ORDER BY seq;

-- name: RecordingEventCount :one
SELECT count(*) FROM recording_events;

-- name: RecordingEventCountValidations :one
-- How many times the recording entered validated from another state: once
-- per validation, re-validations included.
SELECT count(*) FROM recording_events
WHERE recording_id = @recording_id AND new_state = 'validated' AND prior_state <> 'validated';
