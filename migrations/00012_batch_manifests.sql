-- The batch lane's manifests: groups of eligible batch recordings of one
-- tenant, provider and model, sent to the vendor in one request
-- (stt-http/v1's batch routes). A manifest has a stable key (the batch
-- request's Idempotency-Key, so that a manifest sent again after a crash
-- finds the batch it created) and one item per recording, named by the
-- recording's business key. Its history is append-only, like the ledger's.
-- A recording in a manifest still moves through the ledger's state
-- machine; its events name the manifest.
--
-- Manifest states: formed (items chosen, recordings still eligible) →
-- submitted (its recordings moved to submitted, the request may be out) →
-- accepted (the vendor's batch id recorded) → done (every item settled);
-- or unbatched (the vendor offers no batches: the items went one by one).
-- Item states: pending → completed | failed | resubmit (a transient
-- failure, or lost by the vendor: back to eligible for a later manifest)
-- | dropped (its recording had moved on before the request).
--
-- The retention purge removes a purged recording's items, and finished
-- manifests left without items with their events.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE batch_manifests (
    id              uuid PRIMARY KEY,
    manifest_key    text NOT NULL UNIQUE CHECK (manifest_key <> ''),
    tenant_id       text NOT NULL,
    provider        text NOT NULL,
    model           text NOT NULL,
    scope           text NOT NULL,
    state           text NOT NULL CHECK (state IN ('formed', 'submitted', 'accepted', 'done', 'unbatched')),
    vendor_batch_id text,
    items           integer NOT NULL CHECK (items > 0),
    audio_seconds   double precision NOT NULL DEFAULT 0,
    -- The manifest whose unfinished items this one sends again (no key:
    -- the purge removes manifests in any order).
    resubmission_of uuid,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
CREATE INDEX batch_manifests_state ON batch_manifests (state, updated_at);

CREATE TABLE batch_manifest_items (
    manifest_id  uuid NOT NULL REFERENCES batch_manifests (id),
    recording_id uuid NOT NULL REFERENCES recordings (id),
    business_key text NOT NULL,
    position     integer NOT NULL,
    state        text NOT NULL CHECK (state IN ('pending', 'completed', 'failed', 'resubmit', 'dropped')),
    provider_id  text,
    reason       text NOT NULL DEFAULT '',
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (manifest_id, recording_id),
    UNIQUE (manifest_id, position)
);
CREATE INDEX batch_manifest_items_recording ON batch_manifest_items (recording_id);
-- A recording is pending in at most one manifest at a time.
CREATE UNIQUE INDEX batch_manifest_items_one_pending ON batch_manifest_items (recording_id) WHERE state = 'pending';

CREATE TABLE batch_manifest_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    manifest_id uuid NOT NULL REFERENCES batch_manifests (id),
    at          timestamptz NOT NULL,
    kind        text NOT NULL,
    reason      text NOT NULL DEFAULT '',
    detail      jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX batch_manifest_events_manifest ON batch_manifest_events (manifest_id, id);
CREATE TRIGGER batch_manifest_events_purge_only BEFORE UPDATE OR DELETE ON batch_manifest_events
    FOR EACH ROW EXECUTE FUNCTION purge_only();
CREATE TRIGGER batch_manifest_events_no_truncate BEFORE TRUNCATE ON batch_manifest_events
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE TRIGGER batch_manifest_items_purge_only BEFORE DELETE ON batch_manifest_items
    FOR EACH ROW EXECUTE FUNCTION purge_only();
CREATE TRIGGER batch_manifests_purge_only BEFORE DELETE ON batch_manifests
    FOR EACH ROW EXECUTE FUNCTION purge_only();

CREATE OR REPLACE FUNCTION ledger_retention_purge_batch(tenants text[], cutoffs timestamptz[], default_cutoff timestamptz,
                                             purge_at timestamptz, max_recordings integer, purge_reason text, policy jsonb)
    RETURNS TABLE (purge_id bigint, recordings_deleted integer, events_deleted integer, transcripts_deleted integer,
                   action_sets_deleted integer, outbox_deleted integer, outbox_events_deleted integer,
                   extensions_deleted integer, victim_ids uuid[], victim_tenants text[], victim_audio text[])
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path FROM CURRENT AS $$
DECLARE
    victims uuid[];
    tens text[];
    uris text[];
    sets bigint[];
    rows_out bigint[];
    n_rec integer; n_ev integer; n_tr integer; n_as integer; n_ob integer; n_oe integer; n_ext integer;
    pid bigint;
BEGIN
    IF max_recordings IS NULL OR max_recordings < 1 THEN
        RAISE EXCEPTION 'max_recordings must be positive' USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(array_agg(v.id ORDER BY v.updated_at), '{}'), coalesce(array_agg(v.tenant_id ORDER BY v.updated_at), '{}'),
           coalesce(array_agg(v.audio_uri ORDER BY v.updated_at), '{}')
      INTO victims, tens, uris
      FROM (SELECT c.id, c.tenant_id, c.audio_uri, c.updated_at
            FROM ledger_retention_candidates(tenants, cutoffs, default_cutoff) c
            JOIN recordings r ON r.id = c.id
            ORDER BY c.updated_at
            LIMIT max_recordings
            FOR UPDATE OF r SKIP LOCKED) v;

    SELECT coalesce(array_agg(a.id), '{}') INTO sets FROM action_sets a WHERE a.recording_id = ANY (victims);
    SELECT coalesce(array_agg(o.id), '{}') INTO rows_out FROM outbox o WHERE o.action_set_id = ANY (sets);

    PERFORM set_config('callscribe.retention_purge', 'on', true);
    DELETE FROM outbox_events WHERE outbox_id = ANY (rows_out);
    GET DIAGNOSTICS n_oe = ROW_COUNT;
    DELETE FROM outbox WHERE id = ANY (rows_out);
    GET DIAGNOSTICS n_ob = ROW_COUNT;
    DELETE FROM action_sets WHERE id = ANY (sets);
    GET DIAGNOSTICS n_as = ROW_COUNT;
    DELETE FROM transcripts WHERE recording_id = ANY (victims);
    GET DIAGNOSTICS n_tr = ROW_COUNT;
    DELETE FROM scope_deferral_extensions WHERE recording_id = ANY (victims);
    GET DIAGNOSTICS n_ext = ROW_COUNT;
    DELETE FROM recording_events WHERE recording_id = ANY (victims);
    GET DIAGNOSTICS n_ev = ROW_COUNT;
    -- Batch manifests: the victims' items, then every finished manifest
    -- left without items, with its events.
    DELETE FROM batch_manifest_items WHERE recording_id = ANY (victims);
    DELETE FROM batch_manifest_events e USING batch_manifests m
     WHERE e.manifest_id = m.id AND m.state IN ('done', 'unbatched')
       AND NOT EXISTS (SELECT 1 FROM batch_manifest_items i WHERE i.manifest_id = m.id);
    DELETE FROM batch_manifests m
     WHERE m.state IN ('done', 'unbatched')
       AND NOT EXISTS (SELECT 1 FROM batch_manifest_items i WHERE i.manifest_id = m.id);
    DELETE FROM recordings WHERE id = ANY (victims);
    GET DIAGNOSTICS n_rec = ROW_COUNT;
    PERFORM set_config('callscribe.retention_purge', 'off', true);

    INSERT INTO retention_purges (at, cutoff, recordings_deleted, events_deleted, reason, transcripts_deleted,
                                  action_sets_deleted, outbox_deleted, outbox_events_deleted, extensions_deleted, policy)
    VALUES (purge_at, default_cutoff, n_rec, n_ev, purge_reason, n_tr, n_as, n_ob, n_oe, n_ext, coalesce(policy, '{}'::jsonb))
    RETURNING id INTO pid;

    RETURN QUERY SELECT pid, n_rec, n_ev, n_tr, n_as, n_ob, n_oe, n_ext, victims, tens, uris;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ledger_retention_purge_batch(tenants text[], cutoffs timestamptz[], default_cutoff timestamptz,
                                             purge_at timestamptz, max_recordings integer, purge_reason text, policy jsonb)
    RETURNS TABLE (purge_id bigint, recordings_deleted integer, events_deleted integer, transcripts_deleted integer,
                   action_sets_deleted integer, outbox_deleted integer, outbox_events_deleted integer,
                   extensions_deleted integer, victim_ids uuid[], victim_tenants text[], victim_audio text[])
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path FROM CURRENT AS $$
DECLARE
    victims uuid[];
    tens text[];
    uris text[];
    sets bigint[];
    rows_out bigint[];
    n_rec integer; n_ev integer; n_tr integer; n_as integer; n_ob integer; n_oe integer; n_ext integer;
    pid bigint;
BEGIN
    IF max_recordings IS NULL OR max_recordings < 1 THEN
        RAISE EXCEPTION 'max_recordings must be positive' USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(array_agg(v.id ORDER BY v.updated_at), '{}'), coalesce(array_agg(v.tenant_id ORDER BY v.updated_at), '{}'),
           coalesce(array_agg(v.audio_uri ORDER BY v.updated_at), '{}')
      INTO victims, tens, uris
      FROM (SELECT c.id, c.tenant_id, c.audio_uri, c.updated_at
            FROM ledger_retention_candidates(tenants, cutoffs, default_cutoff) c
            JOIN recordings r ON r.id = c.id
            ORDER BY c.updated_at
            LIMIT max_recordings
            FOR UPDATE OF r SKIP LOCKED) v;

    SELECT coalesce(array_agg(a.id), '{}') INTO sets FROM action_sets a WHERE a.recording_id = ANY (victims);
    SELECT coalesce(array_agg(o.id), '{}') INTO rows_out FROM outbox o WHERE o.action_set_id = ANY (sets);

    PERFORM set_config('callscribe.retention_purge', 'on', true);
    DELETE FROM outbox_events WHERE outbox_id = ANY (rows_out);
    GET DIAGNOSTICS n_oe = ROW_COUNT;
    DELETE FROM outbox WHERE id = ANY (rows_out);
    GET DIAGNOSTICS n_ob = ROW_COUNT;
    DELETE FROM action_sets WHERE id = ANY (sets);
    GET DIAGNOSTICS n_as = ROW_COUNT;
    DELETE FROM transcripts WHERE recording_id = ANY (victims);
    GET DIAGNOSTICS n_tr = ROW_COUNT;
    DELETE FROM scope_deferral_extensions WHERE recording_id = ANY (victims);
    GET DIAGNOSTICS n_ext = ROW_COUNT;
    DELETE FROM recording_events WHERE recording_id = ANY (victims);
    GET DIAGNOSTICS n_ev = ROW_COUNT;
    DELETE FROM recordings WHERE id = ANY (victims);
    GET DIAGNOSTICS n_rec = ROW_COUNT;
    PERFORM set_config('callscribe.retention_purge', 'off', true);

    INSERT INTO retention_purges (at, cutoff, recordings_deleted, events_deleted, reason, transcripts_deleted,
                                  action_sets_deleted, outbox_deleted, outbox_events_deleted, extensions_deleted, policy)
    VALUES (purge_at, default_cutoff, n_rec, n_ev, purge_reason, n_tr, n_as, n_ob, n_oe, n_ext, coalesce(policy, '{}'::jsonb))
    RETURNING id INTO pid;

    RETURN QUERY SELECT pid, n_rec, n_ev, n_tr, n_as, n_ob, n_oe, n_ext, victims, tens, uris;
END
$$;
DROP TABLE batch_manifest_events;
DROP TABLE batch_manifest_items;
DROP TABLE batch_manifests;
-- +goose StatementEnd
