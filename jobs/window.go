package jobs

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/riverwake"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
)

// held is what one step holds for its recording's submission: a slot of
// the scope's window and a slot of the vendor's capacity, both keyed by the
// recording, until the vendor's answer settles them.
type held struct {
	window, slot bool
	slotInUse    int
	// slotRefused: the vendor slot, asked for with the window slot, was
	// refused (takeSlot snoozes without asking again).
	slotRefused bool
	// settled: the answer released or kept them.
	settled bool
}

func (p *Pipeline) windowed(s *stepCtx) bool { return p.window != nil && !s.observeOnly }

func (p *Pipeline) planLimit(s *stepCtx) int {
	if p.planLimitOf == nil {
		return 0
	}
	return p.planLimitOf(s.prov.Name())
}

// windowLane is a recording's lane in its scope's window: immediate, or
// batch for every other.
func windowLane(l ledger.Lane) ledger.Lane {
	if l == ledger.LaneImmediate {
		return ledger.LaneImmediate
	}
	return ledger.LaneBatch
}

func (p *Pipeline) windowRequest(s *stepCtx) capacity.WindowRequest {
	return capacity.WindowRequest{Scope: s.tenant.Scope, Holder: s.rec.ID.String(), Lane: windowLane(s.rec.Lane),
		Deadline: s.rec.Deadline, Max: p.planLimit(s), JobID: s.jobID}
}

// A job told to wait at most frontWait for a window slot waits in its
// worker, asking again every frontPoll, for up to frontWaitMax in all.
const (
	frontWait    = 250 * time.Millisecond
	frontPoll    = 10 * time.Millisecond
	frontWaitMax = 2 * time.Second
	// deferredWaitMax bounds the in-worker wait of a job at the front of
	// a deferred scope's line (its place is below the window's target).
	deferredWaitMax = 2500 * time.Millisecond
)

// takeWindow asks the scope's window for a slot (the probe always gets
// one); refused, the job snoozes for as long as its place in the queue
// says. waited reports that it waited in its worker first (the caller
// asks the scope again: it may have been deferred meanwhile).
func (p *Pipeline) takeWindow(ctx context.Context, s *stepCtx, probe bool) (o outcome, waited bool) {
	if !p.windowed(s) {
		return next, false
	}
	req := p.windowRequest(s)
	req.Probe = probe
	g := p.acquireWindow(ctx, s, req)
	p.wake(ctx, g.Wake)
	// Near the front of the line, wait here for the slot (asking Redis
	// every few milliseconds) rather than through River, whose round trip
	// would leave the freed slot idle: the handoff then costs
	// milliseconds, not a fetch poll and a reload.
	wasWaiting := false
	for waited := time.Duration(0); !g.Granted && g.Wait <= frontWait && waited < frontWaitMax && ctx.Err() == nil; {
		d := min(g.Wait, frontPoll)
		if !clock.Sleep(ctx, d) {
			break
		}
		waited += d
		g = p.acquireWindow(ctx, s, req)
		wasWaiting = true
		p.wake(ctx, g.Wake)
	}
	if !g.Granted {
		s.log.Debug("scope window full: waiting in line", slog.String("waiting_for", "scope window"),
			slog.Int("window", g.Size), slog.Int("in_flight", g.InFlight), slog.Int("place", g.Rank), slog.Duration("wait", g.Wait))
		return snoozeFor(g.Wait), wasWaiting
	}
	s.held.window = true
	return next, wasWaiting
}

// acquireWindow asks the scope's window for req's slot and, with slots
// that are capacity leases, the recording's vendor slot with it, in one
// round trip (capacity.Windows.AcquireWithLease): the vendor slot is asked
// for only when the window grants, and takeSlot then takes its answer
// instead of asking again.
func (p *Pipeline) acquireWindow(ctx context.Context, s *stepCtx, req capacity.WindowRequest) capacity.WindowGrant {
	ls, ok := p.slots.(LeaseSlots)
	if !ok || s.prov == nil {
		return p.window.Acquire(ctx, req)
	}
	leases, lreq := ls.BatchRequest(s.prov.Name(), s.rec.ID.String())
	if leases == nil {
		return p.window.Acquire(ctx, req)
	}
	g, _, lg, tried := p.window.AcquireWithLease(ctx, req, leases, lreq)
	if tried {
		s.held.slot, s.held.slotInUse, s.held.slotRefused = lg.Granted, lg.InUse, !lg.Granted
	}
	return g
}

// waitInLine is the wait of a job the scope refused (deferred, or a probe
// is out): with a window, the job takes its place in the scope's queue and
// comes back when its place says, after the deadline, so the scope's jobs
// wake in order (immediate lane first, then by deadline) instead of all at
// the deadline. front reports that the job is among the first the window
// will take when the scope reopens (its place is below the window's
// target) and its wait is short: it may wait in its worker.
func (p *Pipeline) waitInLine(ctx context.Context, s *stepCtx, a ledger.Admission) (o outcome, front bool) {
	if !p.windowed(s) || a.Verdict == ledger.VerdictPaused || a.Until.IsZero() {
		return snoozeFor(a.Wait), false
	}
	req := p.windowRequest(s)
	req.NotBefore = a.Until
	g := p.window.Acquire(ctx, req)
	if g.Granted || g.Uncounted {
		// Only without Redis: fall back to the ledger's jittered wait.
		return snoozeFor(a.Wait), false
	}
	return snoozeFor(g.Wait), g.Rank < max(g.Target, 1) && g.Wait <= deferredWaitMax
}

// settle releases or keeps what the recording holds after the vendor's
// answer a: a real answer releases (the window grows on success); an
// overload answer to a submission releases and shrinks it; accepted work
// (202) and answers to polls that say nothing keep the slots until the
// result arrives. It acts by the recording, so a poll in a later step
// releases what the submission took.
func (p *Pipeline) settle(ctx context.Context, s *stepCtx, a answer) {
	s.held.settled = true
	resp := a.resp
	switch resp.Outcome {
	case stt.OutcomeCompleted, stt.OutcomePermanent:
		p.release(ctx, s, capacity.Success, "")
	case stt.OutcomePending:
		p.keep(ctx, s, a)
	case stt.OutcomeThrottled:
		if a.op != "submit" {
			p.keep(ctx, s, a)
			return
		}
		o := capacity.Overload
		if resp.ConcurrencyRefusal() {
			o = capacity.Refused
			if p.slots != nil && s.held.slot {
				p.slots.ReportRefusal(ctx, s.prov.Name(), s.held.slotInUse)
			}
		}
		p.release(ctx, s, o, "HTTP "+strconv.Itoa(resp.HTTPStatus)+" "+resp.Class)
	case stt.OutcomeTransient:
		if a.op != "submit" {
			p.keep(ctx, s, a)
			return
		}
		p.release(ctx, s, capacity.Neutral, "")
	default:
		p.release(ctx, s, capacity.Neutral, "")
	}
}

// release gives back the recording's window slot (with what the answer
// said) and its vendor slot.
// With slots that are capacity leases (LeaseSlots) both go back in one
// round trip to Redis.
func (p *Pipeline) release(ctx context.Context, s *stepCtx, o capacity.Outcome, reason string) {
	ctx = context.WithoutCancel(ctx)
	if ls, ok := p.slots.(LeaseSlots); ok && s.prov != nil && p.windowed(s) {
		leases, lease := ls.Lease(s.prov.Name(), s.rec.ID.String())
		p.releaseWindowWith(ctx, s, o, reason, leases, lease)
	} else {
		p.releaseWindow(ctx, s, o, reason)
		if p.slots != nil && s.prov != nil {
			p.slots.Release(ctx, s.prov.Name(), s.rec.ID.String())
		}
	}
	s.held = held{settled: true}
}

// releaseWindow gives back the holder's window slot, with what the answer
// said.
func (p *Pipeline) releaseWindow(ctx context.Context, s *stepCtx, o capacity.Outcome, reason string) {
	p.releaseWindowWith(ctx, s, o, reason, nil, capacity.Lease{})
}

// releaseWindowWith is releaseWindow that also gives back lease of leases
// (nil: none), in the same round trip. A release that went well rides on
// the scope's next acquire in this process, or goes within the window's
// ReleaseLinger (capacity.Windows.ReleaseLater); the waiters it calls are
// woken, and a change of size logged, when Redis has answered.
func (p *Pipeline) releaseWindowWith(ctx context.Context, s *stepCtx, o capacity.Outcome, reason string, leases *capacity.Leases, lease capacity.Lease) {
	ctx = context.WithoutCancel(ctx)
	holder := s.rec.ID.String()
	if p.windowed(s) {
		log := s.log
		p.window.ReleaseLater(ctx, s.tenant.Scope, holder, o, reason, p.planLimit(s), leases, lease, func(r capacity.WindowRelease) {
			p.wake(ctx, r.Wake)
			if r.Released && r.After != r.Before {
				log.Info("scope window changed", slog.Int("from", r.Before), slog.Int("to", r.After),
					slog.String("cause", o.String()))
			}
		})
	}
	s.held.window = false
}

// keep holds the recording's slots while the vendor processes it.
func (p *Pipeline) keep(ctx context.Context, s *stepCtx, a answer) {
	extra := 2 * p.cfg.PollInterval
	if a.resp.PollAfter != nil {
		if d := p.cfg.RetryAfter.Decide(*a.resp.PollAfter, true, 0); d.Delay > 0 {
			extra = max(extra, 2*d.Delay)
		}
	}
	holder := s.rec.ID.String()
	if p.windowed(s) {
		p.window.Refresh(ctx, s.tenant.Scope, holder, extra)
	}
	if p.slots != nil {
		p.slots.Extend(ctx, s.prov.Name(), holder, extra)
	}
}

// cooldown restarts the scope's window from its probe: the vendor
// announced a cooldown.
func (p *Pipeline) cooldown(ctx context.Context, s *stepCtx, reason string) {
	if p.windowed(s) {
		p.window.Cooldown(context.WithoutCancel(ctx), s.tenant.Scope, reason, p.planLimit(s))
	}
}

// wake makes the River jobs the window called to free slots available
// now (riverwake.Wake).
func (p *Pipeline) wake(ctx context.Context, jobIDs []int64) { riverwake.Wake(ctx, p.log, jobIDs) }

// Windows reads the scopes' windows (for operators); nil without one.
func (p *Pipeline) Windows() *capacity.Windows { return p.window }
