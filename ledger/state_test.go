package ledger_test

import (
	"context"
	"slices"
	"testing"

	"github.com/callscribe/callscribe/ledger"
)

// The edges exist once in Go and once in the database: they must agree.
func TestStateMachineMatchesDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	rows, err := b.pool.Query(ctx, "SELECT from_state, to_state FROM recording_state_edges")
	if err != nil {
		t.Fatal(err)
	}
	var db []ledger.Edge
	for rows.Next() {
		var e ledger.Edge
		if err := rows.Scan(&e.From, &e.To); err != nil {
			t.Fatal(err)
		}
		db = append(db, e)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	goEdges := ledger.Edges()
	for _, e := range goEdges {
		if !slices.Contains(db, e) {
			t.Errorf("edge %s is in Go but not in the database", e)
		}
	}
	for _, e := range db {
		if !slices.Contains(goEdges, e) {
			t.Errorf("edge %s is in the database but not in Go", e)
		}
	}

	srows, err := b.pool.Query(ctx, "SELECT name, terminal FROM recording_states")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for srows.Next() {
		var s ledger.State
		var terminal bool
		if err := srows.Scan(&s, &terminal); err != nil {
			t.Fatal(err)
		}
		n++
		if !s.Valid() || s.Terminal() != terminal {
			t.Errorf("state %s: database terminal=%v, Go valid=%v terminal=%v", s, terminal, s.Valid(), s.Terminal())
		}
	}
	if n != len(ledger.States()) {
		t.Errorf("database has %d states, Go %d", n, len(ledger.States()))
	}
}

func TestCanTransition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from, to ledger.State
		want     bool
	}{
		{ledger.StateReceived, ledger.StateEligible, true},
		{ledger.StateEligible, ledger.StateSubmitted, true},
		{ledger.StateSubmitted, ledger.StateRetryWait, true},
		{ledger.StateRetryWait, ledger.StateEligible, true},
		{ledger.StateRetryWait, ledger.StateSubmitted, false}, // retry_wait only returns to eligible
		{ledger.StateReceived, ledger.StateSubmitted, false},  // no skipping
		{ledger.StateSubmitted, ledger.StateEligible, false},  // monotonic
		{ledger.StateValidated, ledger.StateFailed, false},
		{ledger.StateValidated, ledger.StateExpired, true},
		{ledger.StateRetryWait, ledger.StateExpired, true},
		{ledger.StateCommitted, ledger.StateExpired, false}, // terminal
		{ledger.StateExpired, ledger.StateEligible, true},   // operator re-drive
		{ledger.StateFailed, ledger.StateEligible, true},    // operator re-drive
		{ledger.StateCommitted, ledger.StateEligible, false},
		{ledger.StateCommitted, ledger.StateValidated, true}, // operator revalidate
		{ledger.StateExpired, ledger.StateSubmitted, false},
		{ledger.StateFailed, ledger.StateFailed, false},
		{ledger.StateReceived, ledger.StateReceived, false},
	}
	for _, tt := range tests {
		if got := ledger.CanTransition(tt.from, tt.to); got != tt.want {
			t.Errorf("CanTransition(%s, %s) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
	for _, s := range ledger.States() {
		for _, to := range ledger.States() {
			if s.Terminal() && ledger.CanTransition(s, to) && !slices.Contains(ledger.RedriveEdges(), ledger.Edge{From: s, To: to}) {
				t.Errorf("terminal %s has an automatic edge to %s", s, to)
			}
		}
	}
}
