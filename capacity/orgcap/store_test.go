package orgcap_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/orgcap"
	"github.com/callscribe/callscribe/internal/testdb"
)

// setup returns a Store acting as the runtime role, as the binary's do,
// and the owner's pool of the same test database.
func setup(t *testing.T) (*orgcap.Store, *pgxpool.Pool) {
	t.Helper()
	owner := testdb.New(t)
	return orgcap.New(testdb.AsRuntime(t, owner)), owner
}

func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	var ie *orgcap.InvalidError
	if !errors.As(err, &ie) || ie.Field != field || !errors.Is(err, orgcap.ErrInvalid) {
		t.Fatalf("%s: %v, want an InvalidError naming %s", what, err, field)
	}
}

func TestSetRefusesNamingTheField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t)
	if _, err := s.Set(ctx, orgcap.Update{Org: "acme", Limit: 5, By: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		u     orgcap.Update
		field string
	}{
		{"org closing a hash tag", orgcap.Update{Org: "x}y", Limit: 1, By: "test"}, "org"},
		{"empty org", orgcap.Update{Limit: 1, By: "test"}, "org"},
		{"long org", orgcap.Update{Org: strings.Repeat("o", capacity.IDMaxLen+1), Limit: 1, By: "test"}, "org"},
		{"campaign with a colon", orgcap.Update{Org: "acme", Campaign: "a:b", Limit: 1, By: "test"}, "campaign"},
		{"org cap 0", orgcap.Update{Org: "acme", Limit: 0, By: "test"}, "limit"},
		{"org cap over the max", orgcap.Update{Org: "acme", Limit: capacity.OrgLimitMax + 1, By: "test"}, "limit"},
		{"campaign cap 0", orgcap.Update{Org: "acme", Campaign: "spring", Limit: 0, By: "test"}, "limit"},
		{"campaign cap over the max", orgcap.Update{Org: "acme", Campaign: "spring", Limit: capacity.CampaignLimitMax + 1, By: "test"}, "limit"},
		{"campaign above its org", orgcap.Update{Org: "acme", Campaign: "spring", Limit: 6, By: "test"}, "limit"},
		{"campaign of an org without a stored cap", orgcap.Update{Org: "rival", Campaign: "spring", Limit: 1, By: "test"}, "org"},
		{"long reason", orgcap.Update{Org: "acme", Limit: 5, Reason: strings.Repeat("r", orgcap.ReasonMaxLen+1), By: "test"}, "reason"},
		{"reason with a control character", orgcap.Update{Org: "acme", Limit: 5, Reason: "a\nb", By: "test"}, "reason"},
		{"nobody", orgcap.Update{Org: "acme", Limit: 5}, "by"},
		{"by with a bidi control", orgcap.Update{Org: "acme", Limit: 5, By: "ops\u202e"}, "by"},
	} {
		_, err := s.Set(ctx, tc.u)
		wantField(t, tc.name, err, tc.field)
	}
	if _, err := s.Set(ctx, orgcap.Update{Org: "acme", Campaign: "spring", Limit: 5, By: "test"}); err != nil {
		t.Fatalf("campaign at its org's cap: %v", err)
	}
	// Lowering the organisation below its campaign is refused, naming the
	// campaign; the campaign first, then the organisation, goes.
	_, err := s.Set(ctx, orgcap.Update{Org: "acme", Limit: 4, By: "test"})
	wantField(t, "org below its campaign", err, "limit")
	if !strings.Contains(err.Error(), "spring") {
		t.Fatalf("org below its campaign: %v, want the campaign named", err)
	}
	if c, err := s.Org(ctx, "acme"); err != nil || c.Limit != 5 {
		t.Fatalf("after the refusals: %+v %v, want cap 5", c, err)
	}
	if _, err := s.Set(ctx, orgcap.Update{Org: "acme", Campaign: "spring", Limit: 3, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, orgcap.Update{Org: "acme", Limit: 3, By: "test"}); err != nil {
		t.Fatalf("org down to its campaign's cap: %v", err)
	}
	if _, err := s.Org(ctx, "rival"); !errors.Is(err, orgcap.ErrNotFound) {
		t.Fatalf("Org of an organisation without a stored cap = %v, want ErrNotFound", err)
	}
	if _, err := s.Campaign(ctx, "acme", "autumn"); !errors.Is(err, orgcap.ErrNotFound) {
		t.Fatalf("Campaign without a stored cap = %v, want ErrNotFound", err)
	}
}

// The database refuses what Store refuses, for a writer that skips
// Store's checks.
func TestDatabaseKeepsCampaignsWithinTheirOrg(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, owner := setup(t)
	rt := testdb.AsRuntime(t, owner)
	if _, err := s.Set(ctx, orgcap.Update{Org: "acme", Limit: 5, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, orgcap.Update{Org: "acme", Campaign: "spring", Limit: 4, By: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO campaign_caps (org, campaign, call_limit, updated_by, updated_at) VALUES ('acme', 'autumn', 6, 'x', now())`,
		`UPDATE campaign_caps SET call_limit = 6 WHERE org = 'acme'`,
		`UPDATE org_caps SET call_limit = 3 WHERE org = 'acme'`,
		`INSERT INTO campaign_caps (org, campaign, call_limit, updated_by, updated_at) VALUES ('rival', 'x', 1, 'x', now())`,
		`UPDATE cap_changes SET call_limit = 1`,
		`DELETE FROM cap_changes`,
		`DELETE FROM campaign_caps`,
		`DELETE FROM org_caps`,
	} {
		if _, err := rt.Exec(ctx, q); err == nil {
			t.Errorf("the runtime role ran %q", q)
		}
	}
	if _, err := owner.Exec(ctx, `UPDATE org_caps SET call_limit = 3 WHERE org = 'acme'`); err == nil || !strings.Contains(err.Error(), "below a campaign") {
		t.Errorf("the owner lowered acme below its campaign: %v", err)
	}
}

// Each change is recorded: who, when, the cap before and after, why; the
// trail reads newest first, every organisation's or one's.
func TestHistoryRecordsEveryChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t)
	for _, u := range []orgcap.Update{
		{Org: "acme", Limit: 2, Reason: "pilot", By: "ops@host"},
		{Org: "acme", Limit: 8, Reason: "spring sale", By: "token 7"},
		{Org: "acme", Campaign: "spring", Limit: 6, By: "token 7"},
		{Org: "rival", Limit: 3, By: "ops@host"},
	} {
		if _, err := s.Set(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.History(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(all))
	for i, c := range all {
		prior := "none"
		if c.PriorLimit != nil {
			prior = fmt.Sprint(*c.PriorLimit)
		}
		got[i] = fmt.Sprintf("%s/%s %s->%d by %s (%s)", c.Org, c.Campaign, prior, c.Limit, c.By, c.Reason)
		if c.At.IsZero() || c.ID == 0 {
			t.Errorf("change %+v without an id or a time", c)
		}
	}
	want := []string{
		"rival/ none->3 by ops@host ()",
		"acme/spring none->6 by token 7 ()",
		"acme/ 2->8 by token 7 (spring sale)",
		"acme/ none->2 by ops@host (pilot)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	acme, err := s.History(ctx, "acme", 2)
	if err != nil || len(acme) != 2 || acme[0].Campaign != "spring" || acme[1].Limit != 8 {
		t.Fatalf("acme's last two changes: %+v %v", acme, err)
	}
	if _, err := s.History(ctx, "", orgcap.HistoryMaxRows+1); !errors.Is(err, orgcap.ErrInvalid) {
		t.Fatalf("History over the max = %v, want ErrInvalid", err)
	}
	orgs, err := s.Orgs(ctx)
	if err != nil || len(orgs) != 2 || orgs[0].Org != "acme" || orgs[0].Limit != 8 || orgs[0].UpdatedBy != "token 7" || orgs[0].Reason != "spring sale" {
		t.Fatalf("Orgs: %+v %v", orgs, err)
	}
	camps, err := s.Campaigns(ctx, "rival")
	if err != nil || len(camps) != 0 {
		t.Fatalf("rival's campaigns: %+v %v", camps, err)
	}
	table, err := s.Table(ctx)
	if err != nil || len(table) != 2 || table["acme"].Limit != 8 || table["acme"].Campaigns["spring"] != 6 || table["rival"].Limit != 3 {
		t.Fatalf("Table: %+v %v", table, err)
	}
}

// Raising a campaign and lowering its organisation at once never leaves
// the campaign above the organisation, whichever wins.
func TestConcurrentChangesKeepTheOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t)
	const rounds = 20
	for i := range rounds {
		org := fmt.Sprintf("org-%d", i)
		if _, err := s.Set(ctx, orgcap.Update{Org: org, Limit: 10, By: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Set(ctx, orgcap.Update{Org: org, Campaign: "c", Limit: 2, By: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for i := range rounds {
		org := fmt.Sprintf("org-%d", i)
		wg.Go(func() {
			_, err := s.Set(ctx, orgcap.Update{Org: org, Limit: 3, By: "lower"})
			errs <- err
		})
		wg.Go(func() {
			_, err := s.Set(ctx, orgcap.Update{Org: org, Campaign: "c", Limit: 8, By: "raise"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	refused := 0
	for err := range errs {
		switch {
		case errors.Is(err, orgcap.ErrInvalid):
			refused++
		case err != nil:
			t.Fatalf("a concurrent change failed otherwise: %v", err)
		}
	}
	table, err := s.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for org, o := range table {
		if o.Campaigns["c"] > o.Limit {
			t.Errorf("%s: campaign cap %d above the organisation's %d", org, o.Campaigns["c"], o.Limit)
		}
	}
	if refused != rounds {
		t.Fatalf("%d of %d pairs had one change refused, want every pair", refused, rounds)
	}
}
