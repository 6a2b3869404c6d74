package capacity

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// WindowRelease is what a release did.
type WindowRelease struct {
	// Released: the holder had a slot.
	Released bool
	// Before and After are the window's size around the release.
	Before, After int
	// Wake are River jobs of waiters called to the freed slots, first in
	// line first: the caller makes them available now, so the line drains
	// at the vendor's pace without anyone polling.
	Wake []int64
}

// A queuedRelease is a release on its way to Redis: waiting in its
// process for its scope's next acquire (ReleaseLater), or being sent.
type queuedRelease struct {
	holder  string
	outcome Outcome
	reason  string
	at      int64 // when it happened, Unix ms of w's clock
	max     int
	// zrem: the vendor lease given back with it, removed from its
	// counter's leases in the same round trip (nil: none).
	zrem   *counter
	id     string
	leases *Leases
	done   func(WindowRelease)
}

// releaseQueue is a scope's releases waiting in this process, and the
// timer that sends them when no acquire came for ReleaseLinger.
type releaseQueue struct {
	rels  []queuedRelease
	timer *time.Timer
}

// ReleaseLater is ReleaseWithLease for a caller that does not wait for
// the answer: done receives it once Redis has answered, at most
// ReleaseLinger later, on a goroutine of its own when an acquire carried
// the release, else on the one that sent it. A release
// that says nothing against the window (Success, Neutral) waits in this
// process for the scope's next Acquire or AcquireWithLease, which gives
// it back first in its own script, so that a scope under load pays one
// round trip to Redis per request instead of two; when none comes within
// ReleaseLinger, the scope's waiting releases go in one script of their
// own. Until then the slot, and the vendor lease, count as held: the
// window errs towards fewer requests in flight, never more. An overload
// or refusal goes at once, after the scope's waiting releases, as every
// release does with ReleaseLinger negative. The hold time the window
// learns is measured to when ReleaseLater was called. A process that
// stops calls Flush; one that crashes leaves its waiting slots to lapse
// with their lease, as those in flight do.
func (w *Windows) ReleaseLater(ctx context.Context, scope, holder string, o Outcome, reason string, max int,
	leases *Leases, lease Lease, done func(WindowRelease)) {
	r := w.queuedRelease(ctx, holder, o, reason, max, leases, lease, done)
	if w.cfg.ReleaseLinger < 0 || (o != Success && o != Neutral) {
		w.send(ctx, scope, append(w.takeQueued(scope), r))
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queued[scope]
	if q == nil {
		q = &releaseQueue{}
		w.queued[scope] = q
	}
	q.rels = append(q.rels, r)
	if q.timer == nil {
		q.timer = time.AfterFunc(w.cfg.ReleaseLinger, func() { w.Flush(context.Background(), scope) })
	}
}

// Flush sends now the releases waiting in this process (ReleaseLater)
// for scopes, or for every scope when none is named. A process calls it
// when it stops. A nil w has nothing to flush.
func (w *Windows) Flush(ctx context.Context, scopes ...string) {
	if w == nil {
		return
	}
	if len(scopes) == 0 {
		w.mu.Lock()
		for s := range w.queued {
			scopes = append(scopes, s)
		}
		w.mu.Unlock()
	}
	for _, s := range scopes {
		if rels := w.takeQueued(s); len(rels) > 0 {
			w.send(ctx, s, rels)
		}
	}
}

// Queued reports how many releases wait in this process (ReleaseLater).
func (w *Windows) Queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, q := range w.queued {
		n += len(q.rels)
	}
	return n
}

// queuedRelease is a release of holder's slot (and of lease, of leases
// when not nil), stamped now. The lease leaves this process's held set
// now; it is removed from Redis with the window's release when both
// share a client, else at once.
func (w *Windows) queuedRelease(ctx context.Context, holder string, o Outcome, reason string, max int,
	leases *Leases, lease Lease, done func(WindowRelease)) queuedRelease {
	r := queuedRelease{holder: holder, outcome: o, reason: reason, at: w.nowMs(), max: max, done: done}
	if leases == nil {
		return r
	}
	if c := leases.releasing(lease); c != nil {
		if leases.kit.Client == w.kit.Client {
			r.zrem, r.id, r.leases = c, lease.ID, leases
		} else {
			leases.removeLease(ctx, c, lease.ID)
		}
	}
	return r
}

// takeQueued removes and returns scope's waiting releases.
func (w *Windows) takeQueued(scope string) []queuedRelease {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queued[scope]
	if q == nil {
		return nil
	}
	delete(w.queued, scope)
	if q.timer != nil {
		q.timer.Stop()
	}
	return q.rels
}

// send gives rels of scope back in one script (the last one's plan
// limit applies) and tells each what it did.
func (w *Windows) send(ctx context.Context, scope string, rels []queuedRelease) {
	octx, cancel := w.kit.Detached(ctx)
	defer cancel()
	args := w.withReleases([]any{w.nowArg(), w.args, rels[len(rels)-1].max}, rels)
	_, answers, err := w.run(octx, windowReleaseScript, w.keys(scope), args, rels)
	if err != nil {
		w.fail.Note("window release "+scope, err)
	}
	tell(rels, answers)
}

// tell gives each release its answer (none: the script failed, and its
// slot lapses with its lease).
func tell(rels []queuedRelease, answers []WindowRelease) {
	for i, r := range rels {
		if r.done == nil {
			continue
		}
		var a WindowRelease
		if i < len(answers) {
			a = answers[i]
		}
		r.done(a)
	}
}

// tellLater is tell off the caller's path: an acquire that carried
// releases goes on with its own work (a submission) while their
// callbacks wake waiters and log.
func tellLater(rels []queuedRelease, answers []WindowRelease) {
	if len(rels) > 0 {
		go tell(rels, answers)
	}
}

// withReleases appends rels to a script's ARGV (luaWindowReleases: their
// count, then holder, outcome, reason and age in ms each).
func (w *Windows) withReleases(args []any, rels []queuedRelease) []any {
	args = append(args, len(rels))
	now := w.nowMs()
	for _, r := range rels {
		args = append(args, r.holder, int(r.outcome), r.reason, max(now-r.at, 0))
	}
	return args
}

// run runs script, whose ARGV carry rels, with the removal of their
// leases in the same round trip. It returns the script's own answer,
// after the releases', and what each release did (tell gives them to
// their callers).
func (w *Windows) run(ctx context.Context, script *redis.Script, keys []string, args []any, rels []queuedRelease) ([]int64, []WindowRelease, error) {
	var res []int64
	var err error
	var zrems []*redis.IntCmd
	if !anyLease(rels) {
		res, err = script.Run(ctx, w.kit.Client, keys, args...).Int64Slice()
	} else {
		// The leases go first: a lease the script asks for sees them gone.
		pipe := w.kit.Client.Pipeline()
		for _, r := range rels {
			if r.zrem != nil {
				zrems = append(zrems, pipe.ZRem(ctx, r.zrem.leasesKey, r.id))
			}
		}
		cmd := script.EvalSha(ctx, pipe, keys, args...)
		_, _ = pipe.Exec(ctx) // each command's own error is read below
		res, err = cmd.Int64Slice()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// Redis lost its scripts (a restart, SCRIPT FLUSH): Run loads it.
			res, err = script.Run(ctx, w.kit.Client, keys, args...).Int64Slice()
		}
	}
	k := 0
	for _, r := range rels {
		if r.zrem != nil {
			if zerr := zrems[k].Err(); zerr != nil {
				r.leases.fail.Note("release "+r.zrem.tag, zerr)
			}
			k++
		}
	}
	if err != nil {
		return nil, nil, err
	}
	// {count, then per release: released, before, after, n, n jobs}
	answers := make([]WindowRelease, len(rels))
	i := 1
	for k := range rels {
		n := int(res[i+3])
		answers[k] = WindowRelease{Released: res[i] == 1, Before: int(res[i+1]), After: int(res[i+2]), Wake: res[i+4 : i+4+n]}
		i += 4 + n
	}
	return res[i:], answers, nil
}

func anyLease(rels []queuedRelease) bool {
	for _, r := range rels {
		if r.zrem != nil {
			return true
		}
	}
	return false
}

// nowMs is w's clock in Unix ms: the test clock when set, else this
// host's (releases measure their age on it; Redis's clock is the one
// that matters, and ages are differences).
func (w *Windows) nowMs() int64 {
	if w.cfg.testNow != nil {
		return w.cfg.testNow()
	}
	return time.Now().UnixMilli()
}
