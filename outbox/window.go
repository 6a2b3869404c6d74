package outbox

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/riverwake"
	"github.com/callscribe/callscribe/ledger"
)

// holderOf is the window holder of outbox row id: a retried try of the
// row is granted its own slot again rather than a second one.
func holderOf(id int64) string { return "outbox:" + strconv.FormatInt(id, 10) }

// windowRequest asks for a slot of s's scope for delivery job jobID: every
// outbox delivery is immediate work, a replay delivery batch work, and the
// earliest-dying goes first.
func windowRequest(s *subject, jobID int64) capacity.WindowRequest {
	return capacity.WindowRequest{Scope: s.Scope, Holder: s.holder, Lane: s.lane, Deadline: s.Deadline, JobID: jobID}
}

// takeWindow asks the scope's window for a slot for s (probe: the
// try is the scope's probe, which always gets one). It reports whether the
// try may go ahead; refused, wait is how long its place in line says
// to snooze. Without a window every try goes ahead.
func (o *Outbox) takeWindow(ctx context.Context, s *subject, jobID int64, probe bool) (granted bool, wait time.Duration) {
	if o.cfg.Window == nil {
		return true, 0
	}
	req := windowRequest(s, jobID)
	req.Probe = probe
	g := o.cfg.Window.Acquire(ctx, req)
	o.wake(ctx, g.Wake)
	if !g.Granted {
		s.log.Debug("CRM scope window full: waiting in line",
			slog.Int("window", g.Size), slog.Int("in_flight", g.InFlight), slog.Int("place", g.Rank), slog.Duration("wait", g.Wait))
		return false, g.Wait
	}
	return true, 0
}

// waitInLine is how long a try the scope refused (deferred, or a probe is
// out) waits: with a window, the delivery takes its place in the scope's line
// and comes back when its place says, after the admission's Until, so the
// scope's deliveries wake in deadline order instead of all at once. A
// paused scope, or a window that granted without Redis, leaves the
// ledger's jittered wait.
func (o *Outbox) waitInLine(ctx context.Context, s *subject, jobID int64, a ledger.Admission) time.Duration {
	if o.cfg.Window == nil || a.Verdict == ledger.VerdictPaused || a.Until.IsZero() {
		return a.Wait
	}
	req := windowRequest(s, jobID)
	req.NotBefore = a.Until
	g := o.cfg.Window.Acquire(ctx, req)
	if g.Granted || g.Uncounted {
		return a.Wait
	}
	return g.Wait
}

// windowOutcome is what the CRM's answer res says to the window: a
// throttled answer (429, a 503 with Retry-After, a request limit) is
// overload; a transient failure (a 5xx, the network, a timeout, a
// cancelled try) says nothing; every definite answer, a permanent refusal
// included, is success.
func windowOutcome(res connector.Result) capacity.Outcome {
	switch {
	case res.Outcome == connector.OutcomeThrottled,
		res.HTTPStatus == http.StatusServiceUnavailable && res.RetryAfter != nil:
		return capacity.Overload
	case res.Outcome == connector.OutcomeTransient:
		return capacity.Neutral
	}
	return capacity.Success
}

// release gives s's slot back with what the CRM's answer said, and
// makes the River jobs of the waiters it calls to the freed slots
// available once Redis has answered: a release that went well rides on
// the scope's next acquire in this process, or goes within the window's
// ReleaseLinger (capacity.Windows.ReleaseLater).
func (o *Outbox) release(ctx context.Context, s *subject, out capacity.Outcome, reason string) {
	if o.cfg.Window == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	o.cfg.Window.ReleaseLater(ctx, s.Scope, s.holder, out, reason, 0, nil, capacity.Lease{}, func(rel capacity.WindowRelease) {
		o.wake(ctx, rel.Wake)
		if rel.Released && rel.After != rel.Before {
			s.logger(o.cfg.Logger).Info("CRM scope window changed", slog.Int("from", rel.Before), slog.Int("to", rel.After),
				slog.String("cause", out.String()))
		}
	})
}

// cooldown restarts the scope's window from its probe: the CRM's answer
// moved the scope's deadline forward.
func (o *Outbox) cooldown(ctx context.Context, scope, reason string) {
	if o.cfg.Window != nil {
		o.cfg.Window.Cooldown(context.WithoutCancel(ctx), scope, reason, 0)
	}
}

// wake makes the River jobs the window called to free slots available
// now (riverwake.Wake).
func (o *Outbox) wake(ctx context.Context, jobIDs []int64) { riverwake.Wake(ctx, o.cfg.Logger, jobIDs) }
