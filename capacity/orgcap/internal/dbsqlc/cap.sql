-- name: OrgCapLock :one
-- An organisation's stored cap, its row locked until the transaction ends.
SELECT call_limit FROM org_caps WHERE org = @org::text FOR UPDATE;

-- name: OrgCapShare :one
-- An organisation's stored cap, its row share-locked (a campaign's change
-- holds it so that the organisation's cap cannot go below it meanwhile).
SELECT call_limit FROM org_caps WHERE org = @org::text FOR SHARE;

-- name: OrgCapUpsert :one
INSERT INTO org_caps AS o (org, call_limit, reason, updated_by, updated_at)
VALUES (@org::text, @call_limit::integer, @reason::text, @updated_by::text, @updated_at::timestamptz)
ON CONFLICT (org) DO UPDATE SET call_limit = EXCLUDED.call_limit, reason = EXCLUDED.reason,
    updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at
RETURNING o.org, o.call_limit, o.reason, o.updated_by, o.updated_at;

-- name: OrgCapGet :one
SELECT org, call_limit, reason, updated_by, updated_at FROM org_caps WHERE org = @org::text;

-- name: OrgCapList :many
SELECT org, call_limit, reason, updated_by, updated_at FROM org_caps ORDER BY org;

-- name: CampaignCapAbove :one
-- The campaign of org with the highest cap above call_limit, if any.
SELECT campaign, call_limit FROM campaign_caps
WHERE org = @org::text AND call_limit > @call_limit::integer
ORDER BY call_limit DESC, campaign LIMIT 1;

-- name: CampaignCapLock :one
SELECT call_limit FROM campaign_caps WHERE org = @org::text AND campaign = @campaign::text FOR UPDATE;

-- name: CampaignCapUpsert :one
INSERT INTO campaign_caps AS c (org, campaign, call_limit, reason, updated_by, updated_at)
VALUES (@org::text, @campaign::text, @call_limit::integer, @reason::text, @updated_by::text, @updated_at::timestamptz)
ON CONFLICT (org, campaign) DO UPDATE SET call_limit = EXCLUDED.call_limit, reason = EXCLUDED.reason,
    updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at
RETURNING c.org, c.campaign, c.call_limit, c.reason, c.updated_by, c.updated_at;

-- name: CampaignCapGet :one
SELECT org, campaign, call_limit, reason, updated_by, updated_at FROM campaign_caps
WHERE org = @org::text AND campaign = @campaign::text;

-- name: CampaignCapList :many
-- Every campaign's stored cap, or org's only when org is not ''.
SELECT org, campaign, call_limit, reason, updated_by, updated_at FROM campaign_caps
WHERE @org::text = '' OR org = @org::text
ORDER BY org, campaign;

-- name: CapTable :many
-- Every stored cap in one statement (one snapshot): each organisation,
-- once per campaign of it (campaign NULL for one without).
SELECT o.org, o.call_limit AS org_limit, c.campaign, c.call_limit AS campaign_limit
FROM org_caps o LEFT JOIN campaign_caps c ON c.org = o.org
ORDER BY o.org, c.campaign;

-- name: CapChangeInsert :one
INSERT INTO cap_changes (org, campaign, prior_limit, call_limit, reason, changed_by, at)
VALUES (@org::text, @campaign::text, sqlc.narg('prior_limit')::integer, @call_limit::integer, @reason::text,
    @changed_by::text, @at::timestamptz)
RETURNING id, org, campaign, prior_limit, call_limit, reason, changed_by, at;

-- name: CapChangeList :many
-- The newest changes first, at most max_rows: every organisation's, or
-- org's only when org is not ''.
SELECT id, org, campaign, prior_limit, call_limit, reason, changed_by, at FROM cap_changes
WHERE @org::text = '' OR org = @org::text
ORDER BY id DESC
LIMIT @max_rows::integer;
