package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
)

// The replay gauges report each active run's figures under its run and
// target, and how many runs are active; a run listed twice is reported
// once; with no run active only the count is served, at 0.
func TestReplayGauges(t *testing.T) {
	t.Parallel()
	runs := []metrics.ReplayRun{
		{ID: 7, Target: "staging", RecordingsEnumerated: 16, RecordingsReplayed: 15, Deliveries: 14, DeliveriesPending: 1,
			CRMEffectsCreated: 6, AnsweredAsReplays: 5, Throttled: 2, Transient: 3, Dead: 4, AuditEventsAppended: 24,
			NewActionVersions: 0, SentInsideKnownCooldown: 0, InFlightAtCooldown: 8},
		{ID: 9, Target: "qa", RecordingsEnumerated: 3},
	}
	runs = append(runs, runs[0]) // listed twice
	m := metrics.New(metrics.Config{ReplayRuns: func(context.Context) ([]metrics.ReplayRun, error) { return runs, nil }})
	fams := scrape(t, m)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"recordings_enumerated", 16}, {"recordings_replayed", 15}, {"deliveries", 14}, {"deliveries_pending", 1},
		{"crm_effects_created", 6}, {"answered_as_replays", 5}, {"throttled", 2}, {"transient", 3}, {"dead", 4},
		{"audit_events_appended", 24}, {"new_action_versions", 0}, {"sent_inside_known_cooldown", 0}, {"in_flight_at_cooldown", 8},
	} {
		name := "callscribe_replay_" + c.name
		if v, ok := value(fams, name, "run", "7", "target", "staging"); !ok || v != c.want {
			t.Errorf("%s{run=7} = %v (present %v), want %v", name, v, ok, c.want)
		}
		if v, ok := value(fams, name, "run", "9", "target", "qa"); !ok || (c.name == "recordings_enumerated") != (v == 3) {
			t.Errorf("%s{run=9} = %v (present %v)", name, v, ok)
		}
		if n := len(fams[name].GetMetric()); n != 2 {
			t.Errorf("%s has %d series, want 2 (one per run)", name, n)
		}
		if f := fams[name]; f.GetType().String() != "GAUGE" || !strings.Contains(f.GetHelp(), "Global") {
			t.Errorf("%s: type %s, help %q", name, f.GetType(), f.GetHelp())
		}
	}
	if v, ok := value(fams, "callscribe_replay_runs_active"); !ok || v != 2 {
		t.Errorf("runs active = %v (present %v), want 2", v, ok)
	}

	runs = nil
	fams = scrape(t, m)
	if v, ok := value(fams, "callscribe_replay_runs_active"); !ok || v != 0 {
		t.Errorf("no run active: runs active = %v (present %v), want 0", v, ok)
	}
	if _, ok := fams["callscribe_replay_recordings_enumerated"]; ok {
		t.Error("no run active, yet a run's figures are served")
	}
}

// A source that cannot be read leaves the replay gauges out and counts
// the failure; the scrape still succeeds.
func TestReplayGaugesUnreadable(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{ReplayRuns: func(context.Context) ([]metrics.ReplayRun, error) {
		return []metrics.ReplayRun{{ID: 1, Target: "staging"}}, errors.New("database down")
	}})
	m.VendorThrottled("generic-http", "s1", 429)
	fams := scrape(t, m)
	for name := range fams {
		if strings.HasPrefix(name, "callscribe_replay_") {
			t.Errorf("%s served from a source that failed", name)
		}
	}
	if v, _ := value(fams, "callscribe_scrape_errors_total", "source", "database"); v != 1 {
		t.Errorf("scrape errors = %v, want 1", v)
	}
	if v, _ := value(fams, "callscribe_vendor_throttled_total", "provider", "generic-http"); v != 1 {
		t.Errorf("throttled = %v, want 1", v)
	}
}
