package serve

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/status"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// Limits of what the status page reads per refresh.
const (
	statusRecentDead     = 5
	statusRecentWarnings = 20
	statusWarningWindow  = 24 * time.Hour
	statusDialQueue      = 50
	statusCallEvents     = 30
)

// statusSources are what the status page reads; any but ledger and pool
// may be nil.
type statusSources struct {
	// pool keeps the page's sessions (table statuspage_sessions).
	pool   *pgxpool.Pool
	ledger *ledger.Ledger
	// jobs gives the rollout cohorts' modes.
	jobs    *jobs.Pipeline
	outbox  *outbox.Outbox
	leases  *capacity.Leases
	windows *capacity.Windows
	slots   *capacity.Slots
	// dialer and timeline: the dial queue and recent call events.
	dialer   *live.Dialer
	timeline *live.Timeline
}

// statusPage returns the status page's handler for serve: admins only,
// by the bearer token (token: config.EnvAPIToken's value, or an admin token of
// store) or by a session signed in with one. Sessions are kept in
// PostgreSQL (src.pool), so every serve process knows them and signing out
// ends one everywhere; a session's token is looked up on every request, so
// revoking it ends the session at once.
func statusPage(a *app.App, src statusSources, store *auth.Store, token string,
	authenticate func(ctx context.Context, bearer string) (string, bool, bool, error),
) (http.Handler, error) {
	sessions, err := status.NewSessions(src.pool, status.SessionTTLDefault, nil)
	if err != nil {
		return nil, err
	}
	return status.New(status.Config{
		Snapshot: src.snapshot,
		IsAdmin:  adminCheck(token, authenticate),
		SignIn: func(ctx context.Context, cred string) (int64, bool, error) {
			if token != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(token)) == 1 {
				return 0, true, nil // the environment's token: id 0
			}
			p, err := store.Authenticate(ctx, cred)
			switch {
			case errors.Is(err, auth.ErrInvalid):
				return 0, false, nil
			case err != nil:
				return 0, false, err
			}
			return p.TokenID, p.Admin, nil
		},
		StillValid: func(ctx context.Context, id int64) (bool, error) {
			if id == 0 {
				return token != "", nil
			}
			t, err := store.Get(ctx, id)
			switch {
			case errors.Is(err, auth.ErrNotFound):
				return false, nil
			case err != nil:
				return false, err
			}
			return t.Admin && t.RevokedAt == nil, nil
		},
		Sessions:      sessions,
		SecureCookies: status.SecureCookies(a.Config.StatusPage.SecureCookies),
		Logger:        a.Logger.With(slog.String("component", "statuspage")),
	})
}

// snapshot reads the page's data. A source that fails is named in
// Problems; the rest is still shown.
func (s statusSources) snapshot(ctx context.Context) (status.Snapshot, error) {
	now := time.Now().UTC()
	snap := status.Snapshot{At: now}
	problem := func(what string, err error) {
		snap.Problems = append(snap.Problems, fmt.Sprintf("%s: %v", what, err))
	}
	counts, err := s.ledger.CountByTenantLaneState(ctx)
	if err != nil {
		return snap, err // PostgreSQL down: the page has nothing to say
	}
	for _, c := range counts {
		snap.Recordings = append(snap.Recordings, status.RecordingCount{Tenant: c.TenantID, Lane: string(c.Lane),
			State: string(c.State), Count: c.Recordings})
	}
	if err := s.cooldowns(ctx, now, &snap); err != nil {
		problem("scope cooldowns", err)
	}
	if s.jobs != nil {
		if err := s.cohorts(ctx, &snap); err != nil {
			problem("rollout cohorts", err)
		}
	}
	if s.leases != nil {
		if err := s.capacity(ctx, now, &snap); err != nil {
			problem("capacity", err)
		}
		snap.FailOpen = append(snap.FailOpen, status.Counter{Name: "leases", Value: s.leases.Uncounted()})
	}
	if s.slots != nil {
		snap.FailOpen = append(snap.FailOpen, status.Counter{Name: "call slots", Value: s.slots.Uncounted()})
	}
	if s.windows != nil {
		snap.FailOpen = append(snap.FailOpen, status.Counter{Name: "windows", Value: s.windows.Uncounted()})
		if err := s.windowWarnings(ctx, now, &snap); err != nil {
			problem("window events", err)
		}
	}
	if s.dialer != nil {
		if err := s.dialQueue(ctx, &snap); err != nil {
			problem("dial queue", err)
		}
		snap.FailOpen = append(snap.FailOpen, status.Counter{Name: "dial queue", Value: s.dialer.Uncounted()})
	}
	if s.timeline != nil {
		if err := s.callEvents(ctx, &snap); err != nil {
			problem("call timelines", err)
		}
	}
	if s.outbox != nil {
		if err := s.outboxState(ctx, &snap); err != nil {
			problem("outbox", err)
		}
		if err := s.replayRuns(ctx, &snap); err != nil {
			problem("replay runs", err)
		}
	}
	if err := s.batchState(ctx, &snap); err != nil {
		problem("batch lane", err)
	}
	slices.SortStableFunc(snap.Warnings, func(a, b status.Warning) int { return b.At.Compare(a.At) })
	if len(snap.Warnings) > statusRecentWarnings {
		snap.Warnings = snap.Warnings[:statusRecentWarnings]
	}
	return snap, nil
}

// dialQueue: the calls waiting to be dialled, oldest first (at most
// statusDialQueue).
func (s statusSources) dialQueue(ctx context.Context, snap *status.Snapshot) error {
	queued, err := s.dialer.Queued(ctx)
	if err != nil {
		return err
	}
	for _, q := range queued[:min(len(queued), statusDialQueue)] {
		snap.DialQueue = append(snap.DialQueue, status.QueuedCall{CallID: q.Call.ID, Agent: q.Call.Agent, QueuedAt: q.QueuedAt,
			WaitingFor: q.WaitingFor, Position: q.Position})
	}
	snap.DialQueued = len(queued)
	return nil
}

// callEvents: the newest events of live calls' timelines.
func (s statusSources) callEvents(ctx context.Context, snap *status.Snapshot) error {
	events, err := s.timeline.Recent(ctx, statusCallEvents)
	if err != nil {
		return err
	}
	for _, e := range events {
		snap.CallEvents = append(snap.CallEvents, status.CallEvent{At: e.At, CallID: e.CallID, Kind: e.Kind, Provider: e.Provider, Detail: e.Detail})
	}
	return nil
}

// cohorts: each rollout cohort's mode, the default one marked.
func (s statusSources) cohorts(ctx context.Context, snap *status.Snapshot) error {
	cs, err := s.jobs.Cohorts(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		snap.Cohorts = append(snap.Cohorts, status.Cohort{Cohort: c.Cohort, Mode: string(c.Mode), Default: !c.Stored, Tenants: c.Tenants})
	}
	return nil
}

// cooldowns: the scopes deferred or paused now, each with the cause of its
// deadline (the last offer that moved it) and its window.
func (s statusSources) cooldowns(ctx context.Context, now time.Time, snap *status.Snapshot) error {
	ds, err := s.ledger.ScopeDeferrals(ctx)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if !d.Active(now) && !d.Paused {
			continue
		}
		c := status.Cooldown{Scope: d.Scope, Deadline: d.NotBefore, Paused: d.Paused, PausedReason: d.PausedReason}
		ext, err := s.ledger.ScopeDeferralExtensions(ctx, d.Scope)
		if err != nil {
			return err
		}
		for i := len(ext) - 1; i >= 0; i-- {
			if e := ext[i]; !e.ObserveOnly && e.ResultingNotBefore.Equal(e.OfferedNotBefore) {
				c.Cause = e.Source
				if e.RetryAfter != nil {
					c.Cause += fmt.Sprintf(" (Retry-After: %q)", *e.RetryAfter)
				}
				if e.Reason != "" {
					c.Cause += ": " + e.Reason
				}
				break
			}
		}
		if s.windows != nil {
			if w, err := s.windows.State(ctx, d.Scope); err == nil {
				c.Window = &status.Window{Size: w.Size, InFlight: w.InFlight, Waiting: w.Waiting, Phase: w.Phase}
			}
		}
		snap.Cooldowns = append(snap.Cooldowns, c)
	}
	return nil
}

// capacity: each provider/kind's leases and peaks, and its learned-limit
// drops of the last statusWarningWindow as warnings (naming the
// organisation that reported the refusal over the capacity API, if one
// did).
func (s statusSources) capacity(ctx context.Context, now time.Time, snap *status.Snapshot) error {
	st, err := s.leases.Status(ctx)
	if err != nil {
		return err
	}
	for _, p := range st {
		pr := status.Provider{Provider: p.Provider, Kind: p.Kind, InUse: p.InUse, ConfiguredLimit: p.ConfiguredLimit,
			EffectiveLimit: p.EffectiveLimit, Learned: p.Learned}
		for _, m := range p.PeakPerMinute {
			pr.Peaks = append(pr.Peaks, status.MinutePeak{Minute: m.Minute, Peak: m.Peak})
		}
		snap.Providers = append(snap.Providers, pr)
		events, err := s.leases.LimitEvents(ctx, p.Provider, p.Kind)
		if err != nil {
			return err
		}
		for _, e := range events {
			if e.Reason != "refusal" || now.Sub(e.At) > statusWarningWindow {
				continue
			}
			detail := fmt.Sprintf("the vendor refused at %d in use: limit %d → %d", e.InUse, e.From, e.To)
			if e.Reporter != "" {
				detail += " (reported by " + e.Reporter + ")"
			}
			snap.Warnings = append(snap.Warnings, status.Warning{At: e.At, Kind: "learned-limit", Subject: p.Provider + "/" + p.Kind,
				Detail: detail})
		}
	}
	// Live calls connected over their transcribers' limit.
	ws, err := s.leases.Warnings(ctx, statusRecentWarnings)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if now.Sub(w.At) <= statusWarningWindow {
			snap.Warnings = append(snap.Warnings, status.Warning{At: w.At, Kind: w.Kind, Subject: w.Subject, Detail: w.Detail})
		}
	}
	return nil
}

// windowWarnings: the cooldowns and overloads of every scope's window in
// the last statusWarningWindow.
func (s statusSources) windowWarnings(ctx context.Context, now time.Time, snap *status.Snapshot) error {
	scopes, err := s.windows.Scopes(ctx)
	if err != nil {
		return err
	}
	for _, scope := range scopes {
		events, err := s.windows.Events(ctx, scope)
		if err != nil {
			return err
		}
		for _, e := range events {
			if (e.Kind != "cooldown" && e.Kind != "overload") || now.Sub(e.At) > statusWarningWindow {
				continue
			}
			snap.Warnings = append(snap.Warnings, status.Warning{At: e.At, Kind: e.Kind, Subject: scope,
				Detail: fmt.Sprintf("window %d → %d: %s", e.From, e.To, e.Reason)})
		}
	}
	return nil
}

// statusRecentManifests is how many manifests the status page lists.
const statusRecentManifests = 10

// batchState: the batch lane's manifests by state, and the newest few.
func (s statusSources) batchState(ctx context.Context, snap *status.Snapshot) error {
	counts, err := s.ledger.ManifestCounts(ctx)
	if err != nil {
		return err
	}
	for _, c := range counts {
		switch c.State {
		case ledger.ManifestDone:
			snap.Batch.Done += c.Manifests
		case ledger.ManifestUnbatched:
			snap.Batch.Unbatched += c.Manifests
		default:
			snap.Batch.InFlight += c.Manifests
			snap.Batch.ItemsInFlight += c.Items
		}
	}
	recent, err := s.ledger.Manifests(ctx, ledger.ManifestFilter{Limit: statusRecentManifests})
	if err != nil {
		return err
	}
	for _, m := range recent {
		snap.Batch.Recent = append(snap.Batch.Recent, status.Manifest{Key: m.Key, Tenant: m.TenantID, State: string(m.State),
			VendorBatchID: m.VendorBatchID, Items: m.Items, Resubmission: m.ResubmissionOf != nil, Created: m.CreatedAt})
	}
	return nil
}

func (s statusSources) outboxState(ctx context.Context, snap *status.Snapshot) error {
	b, err := s.outbox.Backlog(ctx)
	if err != nil {
		return err
	}
	counts, err := s.outbox.CountByState(ctx)
	if err != nil {
		return err
	}
	snap.Outbox = status.Outbox{Pending: b.Pending, OldestAge: b.OldestAge, Delivered: counts[outbox.StateDelivered],
		Dead: counts[outbox.StateDead]}
	if snap.Outbox.Dead == 0 {
		return nil
	}
	dead, err := s.outbox.Rows(ctx, outbox.StateDead, 0)
	if err != nil {
		return err
	}
	slices.SortFunc(dead, func(a, b outbox.Row) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	for _, r := range dead[:min(len(dead), statusRecentDead)] {
		snap.Outbox.RecentDead = append(snap.Outbox.RecentDead, status.DeadDelivery{ID: r.ID, Tenant: r.TenantID,
			CallID: r.CallID, Target: r.Target, Class: r.LastClass, Updated: r.UpdatedAt})
	}
	return nil
}

// replayRuns: the replay runs still active (the newest replayRunsRead),
// each with its figures.
func (s statusSources) replayRuns(ctx context.Context, snap *status.Snapshot) error {
	runs, err := s.outbox.ReplayRuns(ctx, true, replayRunsRead)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if !r.Active() { // ended between the list and its read
			continue
		}
		rep := r.Report
		snap.ReplayRuns = append(snap.ReplayRuns, status.ReplayRun{ID: r.ID, Target: r.Target, State: r.State,
			StartedBy: r.StartedBy, Started: r.CreatedAt, Replayed: rep.RecordingsReplayed, Enumerated: r.Enumerated,
			Settled: rep.Deliveries - rep.Pending, Deliveries: rep.Deliveries, CRMEffectsCreated: rep.CRMEffectsCreated,
			AnsweredAsReplays: rep.AnsweredAsReplays, Throttled: rep.Throttled, Transient: rep.Transient, Dead: rep.Dead,
			SentInsideKnownCooldown: int64(rep.Sends.IgnoredKnownCooldown)})
	}
	return nil
}
