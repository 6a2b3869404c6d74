-- name: TranscriptGet :one
SELECT * FROM transcripts WHERE recording_id = @recording_id;
