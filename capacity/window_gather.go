package capacity

import (
	"context"
	"fmt"
	"time"
)

// An acquireCall is one Acquire or AcquireWithLease on its way to Redis,
// alone or gathered with others of its scope into one script.
type acquireCall struct {
	req WindowRequest
	// The vendor lease's counter, keys and arguments when a lease is
	// taken with the window slot (c nil: none).
	c     *counter
	lkeys []string
	largs []any // acquireScript's ARGV 2–7

	// The answer, set before done is signalled.
	g   WindowGrant
	lr  []int64 // the lease's answer, lr[0] -1 when it was not asked for
	err error
	// done receives nil when the call is answered, or the batch the call
	// is to send when it is the first of the next batch.
	done chan []*acquireCall
}

// gatherKey names the acquires that may share a script: one scope, one
// plan limit (ARGV 3 of the script).
type gatherKey struct {
	scope string
	max   int
}

// acquireGather is a scope's acquires waiting in this process while one
// script of the scope is on its way to Redis.
type acquireGather struct {
	waiting []*acquireCall
}

// windowGatherMax is the most acquires one script serves: the rest wait
// for the next, so that no script holds Redis long.
const windowGatherMax = 64

// acquire sends a to Redis and returns when it is answered. When no
// acquire of its scope (and plan limit) is on its way to Redis from this
// process, a goes at once in a script of its own. Otherwise it waits for
// that script's answer, then goes with every acquire that arrived
// meanwhile, in the order they arrived, in one script: the first of them
// sends it. Each is answered as if it had run alone, in that order, so a
// scope under load costs Redis one round trip per batch instead of one
// per request, and no caller waits longer than the script before its own
// and its own (each bounded by the Redis timeout).
func (w *Windows) acquire(ctx context.Context, a *acquireCall) {
	k := gatherKey{a.req.Scope, a.req.Max}
	w.mu.Lock()
	if g, busy := w.gathering[k]; busy {
		a.done = make(chan []*acquireCall, 1)
		g.waiting = append(g.waiting, a)
		w.mu.Unlock()
		batch := <-a.done
		if batch == nil {
			return
		}
		w.lead(ctx, k, batch)
		return
	}
	w.gathering[k] = &acquireGather{}
	w.mu.Unlock()
	w.lead(ctx, k, []*acquireCall{a})
}

// lead sends batch, whose first call is the caller's own, answers the
// others, and hands the acquires that arrived meanwhile to the first of
// them to send, or marks the scope idle. It does so even if sending
// panics, so that a scope is never left waiting on a script that ended.
func (w *Windows) lead(ctx context.Context, k gatherKey, batch []*acquireCall) {
	defer func() {
		w.mu.Lock()
		g := w.gathering[k]
		next := g.waiting
		if len(next) > windowGatherMax {
			next, g.waiting = next[:windowGatherMax:windowGatherMax], next[windowGatherMax:]
		} else {
			g.waiting = nil
		}
		if len(next) == 0 {
			delete(w.gathering, k)
		}
		w.mu.Unlock()
		for _, a := range batch[1:] {
			a.done <- nil
		}
		if len(next) > 0 {
			next[0].done <- next
		}
	}()
	w.sendAcquires(ctx, k.scope, batch)
}

// sendAcquires runs batch, acquires of scope, in one script after the
// scope's releases queued in this process, and sets each call's answer.
// When Redis cannot be reached, each is granted uncounted (fail open).
func (w *Windows) sendAcquires(ctx context.Context, scope string, batch []*acquireCall) {
	if w.cfg.testGather != nil {
		reqs := make([]WindowRequest, len(batch))
		for i, a := range batch {
			reqs[i] = a.req
		}
		w.cfg.testGather(reqs)
	}
	octx, cancel := w.kit.Detached(ctx)
	defer cancel()
	keys := w.keys(scope)
	rels := w.takeQueued(scope)
	args := w.withReleases([]any{w.nowArg(), w.args, batch[0].req.Max}, rels)
	args = append(args, len(batch))
	for _, a := range batch {
		args = append(args, w.acquireArgs(a.req)...)
		if a.c == nil {
			args = append(args, 0, "", "", "", "", "", "")
			continue
		}
		keys = append(keys, a.lkeys...)
		args = append(args, 1)
		args = append(args, a.largs...)
	}
	res, answers, err := w.run(octx, windowAcquiresScript, keys, args, rels)
	tellLater(rels, answers)
	var grants []WindowGrant
	var leases [][]int64
	if err == nil {
		grants, leases, err = readAcquires(res, len(batch))
	}
	if err != nil {
		for _, a := range batch {
			w.fail.Note("window acquire "+scope, err)
			a.g, a.err = WindowGrant{Granted: true, Uncounted: true}, err
		}
		return
	}
	w.register(octx, scope)
	for i, a := range batch {
		a.g, a.lr = grants[i], leases[i]
	}
}

// readAcquires reads windowAcquiresScript's answers to n acquires (after
// the releases'): per acquire the lease's 4 values, the window's 6, and
// a count of jobs to wake followed by them.
func readAcquires(res []int64, n int) ([]WindowGrant, [][]int64, error) {
	grants, leases := make([]WindowGrant, n), make([][]int64, n)
	i := 0
	for k := range n {
		if len(res) < i+11 || res[i+10] < 0 || len(res) < i+11+int(res[i+10]) {
			return nil, nil, fmt.Errorf("capacity: the window script answered %d values, too few for %d acquires", len(res), n)
		}
		jobs := int(res[i+10])
		leases[k] = res[i : i+4]
		grants[k] = WindowGrant{Granted: res[i+4] == 1, InFlight: int(res[i+5]), Size: int(res[i+6]), Rank: int(res[i+7]),
			Wait: time.Duration(res[i+8]) * time.Millisecond, Target: int(res[i+9]), Wake: res[i+11 : i+11+jobs]}
		i += 11 + jobs
	}
	return grants, leases, nil
}
