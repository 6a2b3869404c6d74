package capacity

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// RefreshResult is what Refresh found.
type RefreshResult struct {
	// Refreshed are the leases extended, with their new Expires.
	Refreshed []Lease
	// Lost are the leases that had already expired (and may have been
	// taken by someone else): their holder no longer counts and should
	// stop its stream or acquire again.
	Lost []Lease
	// Failed says Redis could not be reached (fail open): nothing was
	// refreshed and nothing is known lost.
	Failed bool
}

// Refresh extends each held lease by its kind's lease length from now
// (Redis time), in one round trip: one script per provider/kind, pipelined.
// Refused and uncounted leases are skipped. A Redis failure is noted (fail
// open) and reported as Failed, never returned.
func (l *Leases) Refresh(ctx context.Context, held []Lease) RefreshResult {
	groups := map[string][]Lease{}
	var order []string
	for _, h := range held {
		if !h.counted {
			continue
		}
		tag := l.tag(h.Provider, h.Kind)
		if _, ok := groups[tag]; !ok {
			order = append(order, tag)
		}
		groups[tag] = append(groups[tag], h)
	}
	if len(order) == 0 {
		return RefreshResult{}
	}
	octx, cancel := l.kit.Detached(ctx)
	defer cancel()
	now := l.nowArg()
	cmds := make([]*redis.Cmd, len(order))
	run := func(c redis.Scripter, useSha bool) {
		for i, tag := range order {
			g := groups[tag]
			args := make([]any, 0, len(g)+2)
			args = append(args, now, l.leaseLen(g[0].Kind).Milliseconds())
			for _, h := range g {
				args = append(args, h.ID)
			}
			keys := []string{l.leasesKey(tag)}
			if useSha {
				cmds[i] = refreshScript.EvalSha(octx, c, keys, args...)
			} else {
				cmds[i] = refreshScript.Eval(octx, c, keys, args...)
			}
		}
	}
	var err error
	if len(order) == 1 {
		// Run: EVALSHA, falling back to EVAL on NOSCRIPT.
		g := groups[order[0]]
		args := []any{now, l.leaseLen(g[0].Kind).Milliseconds()}
		for _, h := range g {
			args = append(args, h.ID)
		}
		cmds[0] = refreshScript.Run(octx, l.kit.Client, []string{l.leasesKey(order[0])}, args...)
		err = cmds[0].Err()
	} else {
		_, err = l.kit.Client.Pipelined(octx, func(p redis.Pipeliner) error { run(p, true); return nil })
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			_, err = l.kit.Client.Pipelined(octx, func(p redis.Pipeliner) error { run(p, false); return nil })
		}
	}
	if err != nil {
		l.fail.Note("refresh", err)
		return RefreshResult{Failed: true}
	}
	var out RefreshResult
	for i, tag := range order {
		vals, err := cmds[i].Int64Slice()
		if err == nil && len(vals) == 0 {
			err = errors.New("refresh script returned nothing")
		}
		if err != nil {
			l.fail.Note("refresh "+tag, err)
			out.Failed = true
			continue
		}
		lost := map[int]bool{}
		for _, p := range vals[1:] {
			lost[int(p)-1] = true
		}
		for j, h := range groups[tag] {
			if lost[j] {
				out.Lost = append(out.Lost, h)
				continue
			}
			h.Expires = time.UnixMilli(vals[0])
			out.Refreshed = append(out.Refreshed, h)
		}
	}
	return out
}

// RefreshHeld refreshes every lease this process holds (see Held), forgets
// the lost ones and records the new expiries. A lease released while the
// refresh was in flight is left out of the result. Heartbeat calls it.
func (l *Leases) RefreshHeld(ctx context.Context) RefreshResult {
	res := l.Refresh(ctx, l.Held())
	l.mu.Lock()
	defer l.mu.Unlock()
	out := RefreshResult{Failed: res.Failed}
	for _, h := range res.Lost {
		if _, ok := l.held[h.ID]; ok {
			delete(l.held, h.ID)
			out.Lost = append(out.Lost, h)
		}
	}
	for _, h := range res.Refreshed {
		if _, ok := l.held[h.ID]; ok {
			l.held[h.ID] = h
			out.Refreshed = append(out.Refreshed, h)
		}
	}
	return out
}

// Extend keeps the lease with id of provider/kind alive for d from now
// (Redis time), for work a vendor accepted and is still processing: the
// holder asks again at each poll. It reports whether the lease was still
// held; Redis failures are noted (fail open) and reported as held.
func (l *Leases) Extend(ctx context.Context, provider, kind, id string, d time.Duration) bool {
	c := l.counterOf(provider, kind)
	if c == nil {
		return true
	}
	octx, cancel := l.kit.Detached(ctx)
	defer cancel()
	res, err := refreshScript.Run(octx, l.kit.Client, c.leasesKeys, l.nowArg(), d.Milliseconds(), id).Int64Slice()
	if err != nil {
		l.fail.Note("extend "+c.tag, err)
		return true
	}
	return len(res) == 1
}
