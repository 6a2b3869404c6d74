package metrics

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// ReplayRun is one active replay run's figures, as its report counts them
// from the database (outbox.ReplayRun and its ReplayReport): the values of
// the replay gauges, labelled by run and target.
type ReplayRun struct {
	// ID is the run's id (label run); Target the replay target it
	// delivers to (label target).
	ID     int64
	Target string
	// RecordingsEnumerated: recordings of the run's window enqueued so
	// far; RecordingsReplayed: those re-driven.
	RecordingsEnumerated int64
	RecordingsReplayed   int64
	// Deliveries: the run's action sets to deliver; DeliveriesPending:
	// those not settled yet.
	Deliveries        int64
	DeliveriesPending int64
	// CRMEffectsCreated: deliveries the target applied now (201);
	// AnsweredAsReplays: deliveries it already held (200).
	CRMEffectsCreated int64
	AnsweredAsReplays int64
	// Throttled and Transient: answers that put a delivery back in line;
	// Dead: deliveries that ended unsent or refused.
	Throttled int64
	Transient int64
	Dead      int64
	// AuditEventsAppended: the run's tries and the audit events its ended
	// deliveries appended; NewActionVersions: action sets committed since
	// the run began for the calls it replays (must stay 0).
	AuditEventsAppended int64
	NewActionVersions   int64
	// SentInsideKnownCooldown: sends inside a deferral of the target's
	// scope known when they were admitted (must be 0); InFlightAtCooldown:
	// sends on their way when a later deferral was announced (allowed).
	SentInsideKnownCooldown int64
	InFlightAtCooldown      int64
}

// The replay gauges (Config.ReplayRuns).
var (
	descReplayRunsActive = prometheus.NewDesc("callscribe_replay_runs_active",
		"Replay runs still enumerating or running. Global: read from the database.", nil, nil)
	descReplayEnumerated = replayDesc("recordings_enumerated", "Recordings of the run's window enqueued so far")
	descReplayReplayed   = replayDesc("recordings_replayed", "Recordings re-driven (their committed action sets turned into deliveries)")
	descReplayDeliveries = replayDesc("deliveries", "Action sets the run delivers")
	descReplayPending    = replayDesc("deliveries_pending", "The run's deliveries not settled yet")
	descReplayCreated    = replayDesc("crm_effects_created", "Deliveries the target applied now (201)")
	descReplayAnswered   = replayDesc("answered_as_replays", "Deliveries the target already held (200)")
	descReplayThrottled  = replayDesc("throttled", "Throttled answers (429, or 503 with Retry-After) that put a delivery back in line")
	descReplayTransient  = replayDesc("transient", "Transient failures (5xx, timeouts, resets) that put a delivery back in line")
	descReplayDead       = replayDesc("dead", "Deliveries that ended unsent or refused")
	descReplayAudit      = replayDesc("audit_events_appended", "The run's tries and the audit events its ended deliveries appended")
	descReplayVersions   = replayDesc("new_action_versions", "Action sets committed since the run began for the calls it replays; must be 0")
	descReplayIgnored    = replayDesc("sent_inside_known_cooldown", "Sends inside a deferral of the target's scope known when they were admitted (exact rule); must be 0")
	descReplayInFlight   = replayDesc("in_flight_at_cooldown", "Sends on their way when a later deferral of the target's scope was announced (allowed, counted apart)")
	replayDescs          = []*prometheus.Desc{descReplayRunsActive, descReplayEnumerated, descReplayReplayed, descReplayDeliveries,
		descReplayPending, descReplayCreated, descReplayAnswered, descReplayThrottled, descReplayTransient, descReplayDead,
		descReplayAudit, descReplayVersions, descReplayIgnored, descReplayInFlight}
)

// replayDesc is the gauge callscribe_replay_<name> of one figure of each
// active run, labelled run and target.
func replayDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("callscribe_replay_"+name,
		help+", by active replay run and its target (a run's series end with it). Global: read from the database.",
		[]string{"run", "target"}, nil)
}

// collectReplay reads the active replay runs and sends their gauges; on
// an error it sends none.
func (c *sharedCollector) collectReplay(ctx context.Context, ch chan<- prometheus.Metric) error {
	runs, err := c.m.cfg.ReplayRuns(ctx)
	if err != nil {
		return err
	}
	// A run listed twice would make two series of one name and labels,
	// which fails the whole scrape: each run is sent once.
	seen := make(map[int64]bool, len(runs))
	for _, r := range runs {
		seen[r.ID] = true
	}
	ch <- prometheus.MustNewConstMetric(descReplayRunsActive, prometheus.GaugeValue, float64(len(seen)))
	for _, r := range runs {
		if !seen[r.ID] {
			continue
		}
		seen[r.ID] = false
		run := strconv.FormatInt(r.ID, 10)
		for _, g := range []struct {
			d *prometheus.Desc
			v int64
		}{
			{descReplayEnumerated, r.RecordingsEnumerated},
			{descReplayReplayed, r.RecordingsReplayed},
			{descReplayDeliveries, r.Deliveries},
			{descReplayPending, r.DeliveriesPending},
			{descReplayCreated, r.CRMEffectsCreated},
			{descReplayAnswered, r.AnsweredAsReplays},
			{descReplayThrottled, r.Throttled},
			{descReplayTransient, r.Transient},
			{descReplayDead, r.Dead},
			{descReplayAudit, r.AuditEventsAppended},
			{descReplayVersions, r.NewActionVersions},
			{descReplayIgnored, r.SentInsideKnownCooldown},
			{descReplayInFlight, r.InFlightAtCooldown},
		} {
			ch <- prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, float64(g.v), run, r.Target)
		}
	}
	return nil
}
