-- name: TranscriptInsert :exec
INSERT INTO transcripts (recording_id, provider, provider_id, text, language, confidence,
                         duration_seconds, segments, created_at)
VALUES (@recording_id, @provider, @provider_id, @text, @language, @confidence,
        @duration_seconds, @segments, @created_at);

-- name: TranscriptGet :one
SELECT * FROM transcripts WHERE recording_id = @recording_id;
