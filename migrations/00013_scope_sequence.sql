-- Exact, clock-free accounting of cooldowns. Every offer made to a scope
-- (a deadline extension, or an observe-only offer) takes the scope's next
-- sequence number, in the statement that writes it: scope_deferrals.seq is
-- the number of the latest offer, scope_deferral_extensions.seq each
-- offer's own. An admission reads the scope's seq with its deadline, and a
-- submission records the seq its admission read (admitted_seq): the offers
-- it knew of are exactly those numbered up to it.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE scope_deferrals ADD COLUMN seq bigint NOT NULL DEFAULT 0 CHECK (seq >= 0);
ALTER TABLE scope_deferral_extensions ADD COLUMN seq bigint;

-- Number the offers already recorded, per scope in the order written. The
-- history is append-only: lift its guard for this one statement.
ALTER TABLE scope_deferral_extensions DISABLE TRIGGER scope_deferral_extensions_purge_only;
UPDATE scope_deferral_extensions x SET seq = n.seq
FROM (SELECT id, row_number() OVER (PARTITION BY scope ORDER BY id) AS seq FROM scope_deferral_extensions) n
WHERE n.id = x.id;
ALTER TABLE scope_deferral_extensions ENABLE TRIGGER scope_deferral_extensions_purge_only;

-- A scope's offers may have been recorded before its row existed (an
-- observe-only offer): give every such scope its row.
INSERT INTO scope_deferrals (scope, not_before, updated_at)
SELECT DISTINCT scope, 'epoch'::timestamptz, now() FROM scope_deferral_extensions
ON CONFLICT (scope) DO NOTHING;
UPDATE scope_deferrals d SET seq = m.seq
FROM (SELECT scope, max(seq) AS seq FROM scope_deferral_extensions GROUP BY scope) m
WHERE m.scope = d.scope;

ALTER TABLE scope_deferral_extensions ALTER COLUMN seq SET NOT NULL;
ALTER TABLE scope_deferral_extensions ADD CONSTRAINT scope_deferral_extensions_scope_seq UNIQUE (scope, seq);
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE scope_deferral_extensions DROP CONSTRAINT scope_deferral_extensions_scope_seq;
ALTER TABLE scope_deferral_extensions DROP COLUMN seq;
ALTER TABLE scope_deferrals DROP COLUMN seq;
-- +goose StatementEnd
