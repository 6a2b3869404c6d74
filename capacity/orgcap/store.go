package orgcap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/orgcap/internal/dbsqlc"
	"github.com/callscribe/callscribe/internal/idtext"
)

// Bounds of a change's free text.
const (
	// ReasonMaxLen is the longest reason a change may carry, in bytes.
	ReasonMaxLen = 512
	// ByMaxLen is the longest name of who made a change, in bytes.
	ByMaxLen = 256
	// HistoryMaxRows is the most changes History returns at once.
	HistoryMaxRows = 1000
)

// codeCapOrder is the SQLSTATE migration 00018's triggers raise for a
// campaign cap above its organisation's.
const codeCapOrder = "CS003"

// Cap is a stored cap: an organisation's (Campaign "") or a campaign's.
type Cap struct {
	Org      string `json:"org"`
	Campaign string `json:"campaign,omitempty"`
	// Limit is the concurrent calls the cap allows.
	Limit int `json:"limit"`
	// Reason, UpdatedBy and UpdatedAt are those of the last change.
	Reason    string    `json:"reason"`
	UpdatedBy string    `json:"updated_by"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Change is one entry of the audit trail: a cap set, from PriorLimit (nil:
// none was stored) to Limit.
type Change struct {
	ID         int64     `json:"id"`
	Org        string    `json:"org"`
	Campaign   string    `json:"campaign,omitempty"`
	PriorLimit *int      `json:"prior_limit"`
	Limit      int       `json:"limit"`
	Reason     string    `json:"reason"`
	By         string    `json:"by"`
	At         time.Time `json:"at"`
}

// Update is a cap to set.
type Update struct {
	// Org is the organisation (capacity.CheckID).
	Org string
	// Campaign is the campaign whose cap is set; "" sets the
	// organisation's own.
	Campaign string
	// Limit is the new cap: an organisation's 1–capacity.OrgLimitMax, a
	// campaign's 1–capacity.CampaignLimitMax.
	Limit int
	// Reason says why, for the audit trail: at most ReasonMaxLen bytes,
	// no control or invisible characters. Default "": none given.
	Reason string
	// By names who makes the change ("token 12", "ops@host"): required,
	// at most ByMaxLen bytes, no control or invisible characters.
	By string
}

// validate returns an *InvalidError naming the first bad field of u.
func (u Update) validate() error {
	if err := capacity.CheckID("org", u.Org); err != nil {
		return idError(err)
	}
	if u.Campaign != "" {
		if err := capacity.CheckID("campaign", u.Campaign); err != nil {
			return idError(err)
		}
		if u.Limit < 1 || u.Limit > capacity.CampaignLimitMax {
			return &InvalidError{Field: "limit", Reason: fmt.Sprintf("must be 1–%d for a campaign, got %d", capacity.CampaignLimitMax, u.Limit)}
		}
	} else if u.Limit < 1 || u.Limit > capacity.OrgLimitMax {
		return &InvalidError{Field: "limit", Reason: fmt.Sprintf("must be 1–%d for an organisation, got %d", capacity.OrgLimitMax, u.Limit)}
	}
	if len(u.Reason) > ReasonMaxLen {
		return &InvalidError{Field: "reason", Reason: fmt.Sprintf("is %d bytes long, over the %d allowed", len(u.Reason), ReasonMaxLen)}
	}
	if p := idtext.Problem(u.Reason); p != "" {
		return &InvalidError{Field: "reason", Reason: "has a " + p}
	}
	switch {
	case u.By == "":
		return &InvalidError{Field: "by", Reason: "is required"}
	case len(u.By) > ByMaxLen:
		return &InvalidError{Field: "by", Reason: fmt.Sprintf("is %d bytes long, over the %d allowed", len(u.By), ByMaxLen)}
	}
	if p := idtext.Problem(u.By); p != "" {
		return &InvalidError{Field: "by", Reason: "has a " + p}
	}
	return nil
}

func idError(err error) error {
	var ie *capacity.IDError
	if errors.As(err, &ie) {
		return &InvalidError{Field: ie.Field, Reason: ie.Reason}
	}
	return err
}

// Store keeps the stored caps in PostgreSQL (migration 00018). It is safe
// for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	q    *dbsqlc.Queries
	now  func() time.Time
}

// New returns a Store on pool (migrated: tables org_caps, campaign_caps,
// cap_changes).
func New(pool *pgxpool.Pool) *Store {
	if pool == nil {
		panic("orgcap.New: pool is nil")
	}
	return &Store{pool: pool, q: dbsqlc.New(), now: time.Now}
}

// Set stores u's cap and records the change, in one transaction, and
// returns the change. It returns an *InvalidError naming the field when u
// is not valid, when a campaign's organisation has no stored cap (field
// "org"), when a campaign's cap would be above its organisation's, or an
// organisation's below one of its campaigns' (field "limit"). Setting the
// cap a row already holds is recorded too.
func (s *Store) Set(ctx context.Context, u Update) (Change, error) {
	if err := u.validate(); err != nil {
		return Change{}, err
	}
	var ch Change
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if u.Campaign == "" {
			ch, err = s.setOrg(ctx, tx, u)
		} else {
			ch, err = s.setCampaign(ctx, tx, u)
		}
		return err
	})
	if err != nil {
		what := "organisation " + u.Org
		if u.Campaign != "" {
			what = "campaign " + u.Org + "/" + u.Campaign
		}
		return Change{}, fmt.Errorf("setting the cap of %s: %w", what, translate(err, u))
	}
	return ch, nil
}

func (s *Store) setOrg(ctx context.Context, tx pgx.Tx, u Update) (Change, error) {
	prior, err := optional(s.q.OrgCapLock(ctx, tx, u.Org))
	if err != nil {
		return Change{}, err
	}
	above, err := s.q.CampaignCapAbove(ctx, tx, dbsqlc.CampaignCapAboveParams{Org: u.Org, CallLimit: int32(u.Limit)})
	switch {
	case err == nil:
		return Change{}, &InvalidError{Field: "limit", Reason: fmt.Sprintf(
			"%d is below campaign %s's cap %d: lower the campaign's cap first", u.Limit, above.Campaign, above.CallLimit)}
	case !errors.Is(err, pgx.ErrNoRows):
		return Change{}, err
	}
	at := s.now().UTC()
	if _, err := s.q.OrgCapUpsert(ctx, tx, dbsqlc.OrgCapUpsertParams{Org: u.Org, CallLimit: int32(u.Limit),
		Reason: u.Reason, UpdatedBy: u.By, UpdatedAt: at}); err != nil {
		return Change{}, err
	}
	return s.record(ctx, tx, u, prior, at)
}

func (s *Store) setCampaign(ctx context.Context, tx pgx.Tx, u Update) (Change, error) {
	orgLimit, err := s.q.OrgCapShare(ctx, tx, u.Org)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Change{}, &InvalidError{Field: "org", Reason: fmt.Sprintf(
			"%s has no stored cap: set the organisation's cap first (a campaign's cap is never above it)", u.Org)}
	case err != nil:
		return Change{}, err
	case u.Limit > int(orgLimit):
		return Change{}, &InvalidError{Field: "limit", Reason: fmt.Sprintf(
			"%d is above organisation %s's cap %d", u.Limit, u.Org, orgLimit)}
	}
	prior, err := optional(s.q.CampaignCapLock(ctx, tx, dbsqlc.CampaignCapLockParams{Org: u.Org, Campaign: u.Campaign}))
	if err != nil {
		return Change{}, err
	}
	at := s.now().UTC()
	if _, err := s.q.CampaignCapUpsert(ctx, tx, dbsqlc.CampaignCapUpsertParams{Org: u.Org, Campaign: u.Campaign,
		CallLimit: int32(u.Limit), Reason: u.Reason, UpdatedBy: u.By, UpdatedAt: at}); err != nil {
		return Change{}, err
	}
	return s.record(ctx, tx, u, prior, at)
}

func (s *Store) record(ctx context.Context, tx pgx.Tx, u Update, prior *int32, at time.Time) (Change, error) {
	row, err := s.q.CapChangeInsert(ctx, tx, dbsqlc.CapChangeInsertParams{Org: u.Org, Campaign: u.Campaign,
		PriorLimit: prior, CallLimit: int32(u.Limit), Reason: u.Reason, ChangedBy: u.By, At: at})
	if err != nil {
		return Change{}, err
	}
	return changeOf(row), nil
}

// optional is a locked cap read: nil when no row is stored.
func optional(v int32, err error) (*int32, error) {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &v, nil
}

// translate turns the database's refusals into InvalidErrors: the
// triggers' (a concurrent change got there first) and a campaign whose
// organisation has no row.
func translate(err error, u Update) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case codeCapOrder:
		return &InvalidError{Field: "limit", Reason: pe.Message}
	case "23503": // foreign_key_violation
		return &InvalidError{Field: "org", Reason: u.Org + " has no stored cap: set the organisation's cap first"}
	}
	return err
}

// Orgs returns every organisation's stored cap, by name.
func (s *Store) Orgs(ctx context.Context) ([]Cap, error) {
	rows, err := s.q.OrgCapList(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("listing organisation caps: %w", err)
	}
	out := make([]Cap, len(rows))
	for i, r := range rows {
		out[i] = orgCapOf(r)
	}
	return out, nil
}

// Org returns org's stored cap, or ErrNotFound.
func (s *Store) Org(ctx context.Context, org string) (Cap, error) {
	if err := capacity.CheckID("org", org); err != nil {
		return Cap{}, idError(err)
	}
	r, err := s.q.OrgCapGet(ctx, s.pool, org)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Cap{}, fmt.Errorf("organisation %s: %w", org, ErrNotFound)
	case err != nil:
		return Cap{}, fmt.Errorf("reading the cap of organisation %s: %w", org, err)
	}
	return orgCapOf(r), nil
}

// Campaigns returns the campaigns' stored caps, by organisation and
// campaign: every organisation's, or org's only when org is not "".
func (s *Store) Campaigns(ctx context.Context, org string) ([]Cap, error) {
	if org != "" {
		if err := capacity.CheckID("org", org); err != nil {
			return nil, idError(err)
		}
	}
	rows, err := s.q.CampaignCapList(ctx, s.pool, org)
	if err != nil {
		return nil, fmt.Errorf("listing campaign caps: %w", err)
	}
	out := make([]Cap, len(rows))
	for i, r := range rows {
		out[i] = campaignCapOf(r)
	}
	return out, nil
}

// Campaign returns the stored cap of org's campaign, or ErrNotFound.
func (s *Store) Campaign(ctx context.Context, org, campaign string) (Cap, error) {
	if err := capacity.CheckID("org", org); err != nil {
		return Cap{}, idError(err)
	}
	if err := capacity.CheckID("campaign", campaign); err != nil {
		return Cap{}, idError(err)
	}
	r, err := s.q.CampaignCapGet(ctx, s.pool, dbsqlc.CampaignCapGetParams{Org: org, Campaign: campaign})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Cap{}, fmt.Errorf("campaign %s/%s: %w", org, campaign, ErrNotFound)
	case err != nil:
		return Cap{}, fmt.Errorf("reading the cap of campaign %s/%s: %w", org, campaign, err)
	}
	return campaignCapOf(r), nil
}

// History returns the audit trail, newest first, at most limit changes
// (0: 100; at most HistoryMaxRows): every organisation's, or org's only
// (its own cap's and its campaigns') when org is not "".
func (s *Store) History(ctx context.Context, org string, limit int) ([]Change, error) {
	if org != "" {
		if err := capacity.CheckID("org", org); err != nil {
			return nil, idError(err)
		}
	}
	if limit < 0 || limit > HistoryMaxRows {
		return nil, &InvalidError{Field: "limit", Reason: fmt.Sprintf("must be 0–%d, got %d", HistoryMaxRows, limit)}
	}
	if limit == 0 {
		limit = 100
	}
	rows, err := s.q.CapChangeList(ctx, s.pool, dbsqlc.CapChangeListParams{Org: org, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("reading the cap changes: %w", err)
	}
	out := make([]Change, len(rows))
	for i, r := range rows {
		out[i] = changeOf(r)
	}
	return out, nil
}

// Table returns every stored cap as Slots.SetStoredCaps takes them, read
// in one statement.
func (s *Store) Table(ctx context.Context) (map[string]capacity.OrgSlots, error) {
	rows, err := s.q.CapTable(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("reading the stored caps: %w", err)
	}
	out := make(map[string]capacity.OrgSlots)
	for _, r := range rows {
		o := out[r.Org]
		o.Limit = int(r.OrgLimit)
		if r.Campaign != nil && r.CampaignLimit != nil {
			if o.Campaigns == nil {
				o.Campaigns = map[string]int{}
			}
			o.Campaigns[*r.Campaign] = int(*r.CampaignLimit)
		}
		out[r.Org] = o
	}
	return out, nil
}

func orgCapOf(r dbsqlc.OrgCap) Cap {
	return Cap{Org: r.Org, Limit: int(r.CallLimit), Reason: r.Reason, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt.UTC()}
}

func campaignCapOf(r dbsqlc.CampaignCap) Cap {
	return Cap{Org: r.Org, Campaign: r.Campaign, Limit: int(r.CallLimit), Reason: r.Reason, UpdatedBy: r.UpdatedBy,
		UpdatedAt: r.UpdatedAt.UTC()}
}

func changeOf(r dbsqlc.CapChange) Change {
	c := Change{ID: r.ID, Org: r.Org, Campaign: r.Campaign, Limit: int(r.CallLimit), Reason: r.Reason, By: r.ChangedBy, At: r.At.UTC()}
	if r.PriorLimit != nil {
		p := int(*r.PriorLimit)
		c.PriorLimit = &p
	}
	return c
}
