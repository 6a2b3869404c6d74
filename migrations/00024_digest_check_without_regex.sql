-- The recordings' digest check without a regular expression.
--
-- recordings_audio_sha256_check (migration 00001) held audio_sha256 to
-- '^[0-9a-f]{64}$' with PostgreSQL's regular-expression engine, which
-- every INSERT and every UPDATE of a recording runs (PostgreSQL checks
-- each CHECK of a row it writes, whatever the columns set). It was the
-- dearest part of an ingest's insert: inserting chunks of 1,000 rows
-- into a copy of the table took 16-22 ms with it and 9-12 ms without.
-- The same rule is written with two plain string functions: 64 bytes, and
-- nothing left once the leading characters of 0-9a-f are trimmed. A text
-- of 64 bytes that are all among those 16 ASCII characters is exactly a
-- match of the expression (TestDatabaseDigestCheckIsSixtyFourLowerHexDigits
-- draws digests and near misses, multi-byte characters among them,
-- against Go's regexp).
--
-- Outside a transaction, so that the rows already stored are read without
-- blocking the pipeline's writes: the first statement swaps the check in
-- one step (the table's lock held for that step alone; from then on every
-- row written is checked by the new one), the second reads the stored
-- rows under a lock that lets inserts and updates go on. Every row already
-- stored passed the old check, so it passes the new one. Stopped between
-- the two, the migration is not recorded as applied, and run again it
-- does both again.

-- +goose NO TRANSACTION

-- +goose Up
ALTER TABLE recordings DROP CONSTRAINT recordings_audio_sha256_check,
    ADD CONSTRAINT recordings_audio_sha256_check
    CHECK (octet_length(audio_sha256) = 64 AND ltrim(audio_sha256, '0123456789abcdef') = '') NOT VALID;
ALTER TABLE recordings VALIDATE CONSTRAINT recordings_audio_sha256_check;

-- +goose Down
ALTER TABLE recordings DROP CONSTRAINT recordings_audio_sha256_check,
    ADD CONSTRAINT recordings_audio_sha256_check CHECK (audio_sha256 ~ '^[0-9a-f]{64}$') NOT VALID;
ALTER TABLE recordings VALIDATE CONSTRAINT recordings_audio_sha256_check;
