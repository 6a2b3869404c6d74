-- The audio's duration, measured at ingest from the WAV header, so that
-- validation compares the transcript with it without reading the audio
-- again. NULL means unknown: the audio is not a WAV file ingest can measure,
-- or the recording was ingested before this migration. Validation skips the
-- duration check for those and says so in the validated event.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE recordings
    ADD COLUMN audio_duration_ms bigint CHECK (audio_duration_ms >= 0);
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE recordings DROP COLUMN audio_duration_ms;
-- +goose StatementEnd
