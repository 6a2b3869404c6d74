-- Organisation and campaign call caps set at run time (package
-- capacity/orgcap: `callscribe orgs set`, `campaigns set`, PUT
-- /v1/admin/orgs/...). A stored cap overrides the configured one
-- (capacity.orgs); every process holding call slots re-reads the caps every
-- few seconds, so a change applies without a restart.
--
-- An organisation's stored cap is 1–10000 (capacity.OrgLimitMax), a
-- campaign's 1–20 (capacity.CampaignLimitMax) and never above its
-- organisation's stored cap, which it needs: a campaign's row references its
-- organisation's. The triggers refuse a campaign cap above its
-- organisation's and an organisation's cap below one of its campaigns', so
-- that two changes at once cannot break the rule either.
--
-- Every change is a row of cap_changes (who, when, the cap before and
-- after, why), append-only. Caps are changed, never deleted.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE org_caps (
    org        text PRIMARY KEY CHECK (org ~ '^[A-Za-z0-9._-]{1,128}$'),
    call_limit integer NOT NULL CHECK (call_limit BETWEEN 1 AND 10000),
    reason     text NOT NULL DEFAULT '' CHECK (length(reason) <= 512),
    updated_by text NOT NULL CHECK (updated_by <> '' AND length(updated_by) <= 256),
    updated_at timestamptz NOT NULL
);

CREATE TABLE campaign_caps (
    org        text NOT NULL REFERENCES org_caps (org),
    campaign   text NOT NULL CHECK (campaign ~ '^[A-Za-z0-9._-]{1,128}$'),
    call_limit integer NOT NULL CHECK (call_limit BETWEEN 1 AND 20),
    reason     text NOT NULL DEFAULT '' CHECK (length(reason) <= 512),
    updated_by text NOT NULL CHECK (updated_by <> '' AND length(updated_by) <= 256),
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (org, campaign)
);

-- The audit trail: campaign '' is the organisation's own cap; prior_limit
-- NULL, no cap was stored before.
CREATE TABLE cap_changes (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org         text NOT NULL,
    campaign    text NOT NULL DEFAULT '',
    prior_limit integer,
    call_limit  integer NOT NULL,
    reason      text NOT NULL DEFAULT '',
    changed_by  text NOT NULL,
    at          timestamptz NOT NULL
);
CREATE INDEX cap_changes_org ON cap_changes (org, id);

-- A campaign's cap is never above its organisation's: checked under a
-- share lock of the organisation's row, so that a concurrent change of the
-- organisation's cap waits for this one (and the reverse).
CREATE FUNCTION campaign_caps_within_org() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    org_limit integer;
BEGIN
    SELECT o.call_limit INTO org_limit FROM org_caps o WHERE o.org = NEW.org FOR SHARE;
    IF org_limit IS NOT NULL AND NEW.call_limit > org_limit THEN
        RAISE EXCEPTION 'campaign %/% cap % is above its organisation''s cap %', NEW.org, NEW.campaign, NEW.call_limit, org_limit
            USING ERRCODE = 'CS003';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER campaign_caps_within_org BEFORE INSERT OR UPDATE ON campaign_caps
    FOR EACH ROW EXECUTE FUNCTION campaign_caps_within_org();

CREATE FUNCTION org_caps_above_campaigns() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    top integer;
BEGIN
    SELECT max(c.call_limit) INTO top FROM campaign_caps c WHERE c.org = NEW.org;
    IF top IS NOT NULL AND NEW.call_limit < top THEN
        RAISE EXCEPTION 'organisation % cap % is below a campaign''s cap %', NEW.org, NEW.call_limit, top
            USING ERRCODE = 'CS003';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER org_caps_above_campaigns BEFORE UPDATE OF call_limit ON org_caps
    FOR EACH ROW EXECUTE FUNCTION org_caps_above_campaigns();

-- Pinned search_path, as every function of the schema (migration 00014).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION campaign_caps_within_org() SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION org_caps_above_campaigns() SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

CREATE TRIGGER cap_changes_append_only BEFORE UPDATE OR DELETE ON cap_changes
    FOR EACH ROW EXECUTE FUNCTION append_only();
CREATE TRIGGER cap_changes_no_truncate BEFORE TRUNCATE ON cap_changes
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE TRIGGER org_caps_no_delete BEFORE DELETE ON org_caps
    FOR EACH ROW EXECUTE FUNCTION append_only();
CREATE TRIGGER org_caps_no_truncate BEFORE TRUNCATE ON org_caps
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
CREATE TRIGGER campaign_caps_no_delete BEFORE DELETE ON campaign_caps
    FOR EACH ROW EXECUTE FUNCTION append_only();
CREATE TRIGGER campaign_caps_no_truncate BEFORE TRUNCATE ON campaign_caps
    FOR EACH STATEMENT EXECUTE FUNCTION append_only();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE cap_changes;
DROP TABLE campaign_caps;
DROP TABLE org_caps;
DROP FUNCTION org_caps_above_campaigns();
DROP FUNCTION campaign_caps_within_org();
-- +goose StatementEnd
