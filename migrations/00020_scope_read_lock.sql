-- An admission reads its scope's deferral without locking the row.
--
-- Every transcription and every delivery reads its scope's deferral before
-- it is admitted, and that read must wait for an extension being written
-- (a 429 being recorded by another worker) to commit, so that an admission
-- that starts after the extension began sees it. The read did so with
-- FOR SHARE on the scope's row: one row shared by every worker of the
-- scope, so every read took a row lock (a transaction id of its own, a
-- commit record to flush) and, while another reader held it, a new
-- MultiXact: 8,350 reads a second against 36,700 without the lock on one
-- scope.
--
-- The wait is now a transaction-level advisory lock on the scope's key
-- (scope_deferral_lock_key): every write of scope_deferrals takes it
-- exclusive (scope_deferral_write_lock, an AFTER row trigger, so a writer
-- holds the row before the key, in one order), and an admission's read
-- takes it shared in a statement before the read, in the same transaction
-- (one round trip: the two statements go in one batch, one implicit
-- transaction). A read that gets the key before a writer reads before that
-- writer can commit (the writer waits for the key); a read that asks for
-- it after the writer holds it waits for the writer's commit and then
-- reads with a new snapshot, which sees the extension. A shared advisory
-- lock needs no transaction id and writes nothing.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION scope_deferral_lock_key(scope text) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN hashtextextended('scope_deferrals:' || scope, 7033);

CREATE FUNCTION scope_deferral_write_lock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(scope_deferral_lock_key(NEW.scope));
    RETURN NULL;
END
$$;

-- Pinned search_path, as every function of the schema (migration 00014).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION scope_deferral_lock_key(text) SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION scope_deferral_write_lock() SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

CREATE TRIGGER scope_deferral_write_lock AFTER INSERT OR UPDATE ON scope_deferrals
    FOR EACH ROW EXECUTE FUNCTION scope_deferral_write_lock();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER scope_deferral_write_lock ON scope_deferrals;
DROP FUNCTION scope_deferral_write_lock();
DROP FUNCTION scope_deferral_lock_key(text);
-- +goose StatementEnd
