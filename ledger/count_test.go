package ledger_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/ledger"
)

// CountByTenantLaneState counts each tenant's recordings per lane and
// state, sorted, leaving out what has none.
func TestCountByTenantLaneState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ingest := func(tenant string, lane ledger.Lane) ledger.Recording {
		n := newRecording()
		n.TenantID, n.Lane = tenant, lane
		res, err := b.ledger.Ingest(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return res.Recording
	}
	ingest("zeta", ledger.LaneBatch)
	ingest("acme", ledger.LaneBatch)
	ingest("acme", ledger.LaneBatch)
	moved := ingest("acme", ledger.LaneImmediate)
	ingest("acme", ledger.LaneImmediate)
	b.walk(t, moved, ledger.StateEligible)

	got, err := b.ledger.CountByTenantLaneState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := moved.State // the state Ingest leaves a recording in
	want := []ledger.StateCount{
		{TenantID: "acme", Lane: ledger.LaneBatch, State: first, Recordings: 2},
		{TenantID: "acme", Lane: ledger.LaneImmediate, State: ledger.StateEligible, Recordings: 1},
		{TenantID: "acme", Lane: ledger.LaneImmediate, State: first, Recordings: 1},
		{TenantID: "zeta", Lane: ledger.LaneBatch, State: first, Recordings: 1},
	}
	slices.SortFunc(want[1:3], func(a, b ledger.StateCount) int { return strings.Compare(string(a.State), string(b.State)) })
	if !slices.Equal(got, want) {
		t.Fatalf("counts:\n got %+v\nwant %+v", got, want)
	}
}
