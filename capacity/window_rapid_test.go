package capacity_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/lane"
	"github.com/callscribe/callscribe/internal/testredis"
)

// windowModel is the window scripts' specification, written plainly.
type windowModel struct {
	cfg capacity.WindowConfig
	max int

	fresh                                    bool
	size, target, ceiling, proven, acks      int
	epoch, strikes, strikeN                  int
	ceilingAt, retry, hold                   int64
	phase                                    string
	inflight                                 map[string]*windowSlot
	waitOrder, waitDue, waitExp, waitJob     map[string]int64
	lease, minW, maxW, late, retry0, retryMx int64
	share                                    int
}

type windowSlot struct {
	exp, at  int64
	n, epoch int
	lane     capacity.Lane
}

func newWindowModel(cfg capacity.WindowConfig, max int) *windowModel {
	cfg = cfg.WithDefaults()
	return &windowModel{cfg: cfg, max: max, fresh: true, inflight: map[string]*windowSlot{},
		waitOrder: map[string]int64{}, waitDue: map[string]int64{}, waitExp: map[string]int64{}, waitJob: map[string]int64{},
		lease: cfg.Lease.Milliseconds(), minW: cfg.MinWait.Milliseconds(), maxW: cfg.MaxWait.Milliseconds(),
		late: cfg.Late.Milliseconds(), retry0: cfg.CeilingRetry.Milliseconds(), retryMx: capacity.WindowCeilingRetryMax.Milliseconds(),
		share: int(math.Round(cfg.ImmediateShare * 1000))}
}

// load is the scripts' prelude: first use, the plan cap, expiry.
func (m *windowModel) load(now int64) {
	if m.fresh {
		m.fresh = false
		m.size, m.hold, m.retry = m.cfg.Initial, m.cfg.Hold.Milliseconds(), m.retry0
		m.target = m.cfg.StartTarget
		if m.max > 0 {
			m.target = m.max
		}
		m.target = max(m.target, m.size)
		m.phase = "slow-start"
		if m.size >= m.target {
			m.phase = "steady"
		}
	}
	if m.max > 0 {
		m.size, m.target = min(m.size, m.max), min(m.target, m.max)
	}
	for h, s := range m.inflight {
		if s.exp <= now {
			delete(m.inflight, h)
		}
	}
	for h, e := range m.waitExp {
		if e <= now {
			delete(m.waitExp, h)
			delete(m.waitOrder, h)
			delete(m.waitDue, h)
			delete(m.waitJob, h)
		}
	}
}

// sorted is the waiters in line order (order, then holder).
func (m *windowModel) sorted() []string {
	all := make([]string, 0, len(m.waitOrder))
	for h := range m.waitOrder {
		all = append(all, h)
	}
	sort.Slice(all, func(i, j int) bool {
		if m.waitOrder[all[i]] != m.waitOrder[all[j]] {
			return m.waitOrder[all[i]] < m.waitOrder[all[j]]
		}
		return all[i] < all[j]
	})
	return all
}

// wake calls the first free waiters asleep and returns their jobs.
func (m *windowModel) wake(now int64, free int) []int64 {
	var out []int64
	if free <= 0 {
		return out
	}
	all := m.sorted()
	for _, h := range all[:min(free, len(all))] {
		if d, ok := m.waitDue[h]; ok && d > now+m.late {
			m.waitDue[h] = now
			m.waitExp[h] = now + 5000 + m.late*8
			if j, ok := m.waitJob[h]; ok {
				out = append(out, j)
			}
		}
	}
	return out
}

func (m *windowModel) laneCap(l capacity.Lane) int {
	if l == lane.Batch && m.share > 0 {
		return max(1, m.size-int(math.Ceil(float64(m.size*m.share)/1000)))
	}
	return m.size
}

// ahead is the waiters before holder in line.
func (m *windowModel) ahead(holder string) []string {
	all := m.sorted()
	for i, h := range all {
		if h == holder {
			return all[:i]
		}
	}
	return nil
}

func (m *windowModel) acquire(now int64, holder string, ln capacity.Lane, order, nb int64, probe bool, job int64) (bool, int64, []int64) {
	m.load(now)
	n := len(m.inflight)
	if s, ok := m.inflight[holder]; ok {
		s.exp = now + m.lease
		return true, 0, nil
	}
	m.waitOrder[holder] = order
	ahead := m.ahead(holder)
	r := len(ahead)
	present := 0
	for _, h := range ahead {
		if ln != lane.Batch || m.waitOrder[h] >= 1e13 {
			continue // only immediate waiters hold a batch request back
		}
		d, ok := m.waitDue[h]
		if !ok || (d <= now+m.late && d >= now-m.late*8) {
			present++
		}
	}
	capN := m.laneCap(ln)
	free := capN - n
	if probe || (nb == 0 && free > 0 && present < free) {
		delete(m.waitOrder, holder)
		delete(m.waitDue, holder)
		delete(m.waitExp, holder)
		delete(m.waitJob, holder)
		m.inflight[holder] = &windowSlot{exp: now + m.lease, at: now, n: n + 1, epoch: m.epoch, lane: ln}
		var wakes []int64
		if nb <= now {
			wakes = m.wake(now, m.size-n-1)
		}
		return true, 0, wakes
	}
	if job > 0 {
		m.waitJob[holder] = job
	}
	var wait int64
	if nb > 0 { // refused by the scope: a place in line only, never a slot
		offset := int64(math.Floor(float64(int64(r)*m.hold) / float64(max(1, m.target))))
		wait = max(nb-now, 0) + min(offset, m.maxW)
		if nb <= now {
			wait = max(m.minW, wait)
		}
	} else {
		pos := max(1, r-max(free, 0)+1)
		wait = int64(math.Ceil(float64(int64(pos)*m.hold) / float64(max(1, capN))))
		wait = max(m.minW, min(wait, m.maxW))
	}
	m.waitDue[holder] = now + wait
	m.waitExp[holder] = now + wait + max(wait, 5000) + m.late*8
	return false, wait, nil
}

func (m *windowModel) release(now int64, holder string, o capacity.Outcome) []int64 {
	_, wakes := m.releaseAt(now, now, holder, o)
	return wakes
}

// releaseAt is a release that happened at at and reaches Redis at now
// (ReleaseLater): the hold time is measured to at. It reports whether
// holder had a slot.
func (m *windowModel) releaseAt(now, at int64, holder string, o capacity.Outcome) (bool, []int64) {
	m.load(now)
	s, ok := m.inflight[holder]
	if !ok {
		return false, nil
	}
	delete(m.inflight, holder)
	m.releaseOutcome(now, at, s, o)
	return true, m.wake(now, m.size-len(m.inflight))
}

// releaseOutcome adapts the window to what the answer to s, at at, said.
func (m *windowModel) releaseOutcome(now, at int64, s *windowSlot, o capacity.Outcome) {
	n, current := s.n, s.epoch == m.epoch
	switch o {
	case capacity.Success:
		m.hold = int64(math.Floor(float64(m.hold)*0.8 + float64(max(0, at-s.at))*0.2))
		m.proven = max(m.proven, n)
		if m.strikeN > 0 && n >= m.strikeN {
			m.strikes, m.strikeN = 0, 0
		}
		if m.ceiling > 0 && n >= m.ceiling {
			m.ceiling, m.ceilingAt, m.retry = 0, 0, m.retry0
		}
		if !current {
			return
		}
		if m.size < m.target {
			m.size++
			m.phase = "slow-start"
			if m.size >= m.target {
				m.phase = "steady"
			}
		} else if n >= m.size || len(m.inflight)+1 >= m.size {
			m.acks++
			if m.acks >= m.size*m.cfg.GrowRounds {
				m.acks = 0
				c := m.size + 1
				atPlan := m.max > 0 && c > m.max
				refusedYet := m.ceiling > 0 && c >= m.ceiling && now-m.ceilingAt < m.retry
				if !atPlan && !refusedYet {
					m.size, m.target = c, c
				}
			}
		}
	case capacity.Overload, capacity.Refused:
		shrink := false
		if o == capacity.Overload && !current {
			// stale: the cooldown that followed it already restarted the window
		} else if n > 1 {
			if o == capacity.Refused {
				shrink = true
			} else {
				m.strikes++
				if m.strikeN == 0 || n < m.strikeN {
					m.strikeN = n
				}
				shrink = m.strikes >= m.cfg.Strikes
			}
		}
		if shrink {
			m.acks = 0
			to := max(1, n-1)
			m.size, m.target = min(m.size, to), min(m.target, to)
			if m.ceiling == n {
				m.retry = min(m.retry*2, m.retryMx)
			} else {
				m.retry = m.retry0
			}
			m.ceiling, m.ceilingAt, m.strikes, m.strikeN = n, now, 0, 0
			if m.proven >= n {
				m.proven = n - 1
			}
			if m.phase != "probe" {
				m.phase = "steady"
			}
		}
	}
}

func (m *windowModel) cooldown(now int64) {
	m.load(now)
	if m.phase != "probe" || m.size > 1 {
		m.target = max(m.target, m.size)
		m.size, m.phase = 1, "probe"
		m.epoch++
	}
}

// TestWindowScriptsProperty runs random interleavings of acquire (either
// lane, with or without a deferral or a probe), release with each outcome,
// at once or later (ReleaseLater: it waits in the process for the next
// acquire, release, cooldown or flush, which sends it first), cooldown,
// Redis time advancing past leases and waits, and a restart (a new
// Windows on the same Redis; releases still waiting in the old one are
// lost, as in a crash), against windowModel: every grant, wait, release's
// answer and the window's state must match.
func TestWindowScriptsProperty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testredis.Client(t)
	base := testredis.Prefix(t, rdb, "window")
	var run atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		prefix := fmt.Sprintf("%s:%d", base, run.Add(1))
		defer testredis.DeleteKeys(rdb, prefix)
		clk := newLeaseClock()
		r := captest.OnRedis(rt, rdb, prefix)
		cfg := capacity.WithWindowTestNow(capacity.WindowConfig{Lease: 2 * time.Second, ReleaseLinger: time.Hour,
			Hold: 200 * time.Millisecond, GrowRounds: rapid.IntRange(1, 3).Draw(rt, "rounds"),
			Strikes: rapid.IntRange(1, 3).Draw(rt, "strikes"), StartTarget: rapid.IntRange(1, 6).Draw(rt, "start")}, millis(clk))
		planMax := rapid.IntRange(0, 5).Draw(rt, "max")
		m := newWindowModel(cfg, planMax)
		newWin := func() *capacity.Windows {
			w, err := capacity.NewWindows(r, cfg)
			if err != nil {
				rt.Fatal(err)
			}
			return w
		}
		w := newWin()
		holders := []string{"a", "b", "c", "d", "e", "f", "g"}
		const scope = "acme:general"
		// pending: the releases waiting in w, as the model will apply
		// them when w sends them; each answer must be the model's.
		type pendingRelease struct {
			holder string
			o      capacity.Outcome
			at     int64
		}
		var pending []pendingRelease
		answers := make(chan capacity.WindowRelease, 64) // an acquire's carried releases answer on a goroutine of their own
		// touched: a script with the plan limit made the window (a read
		// of a window not made yet makes it without the limit).
		touched := false
		sent := func(rt *rapid.T, op string) {
			now := clk.Now().UnixMilli()
			for i, p := range pending {
				var a capacity.WindowRelease
				select {
				case a = <-answers:
				case <-time.After(10 * time.Second):
					rt.Fatalf("%s: %d releases answered of the %d waiting", op, i, len(pending))
				}
				had, wakes := m.releaseAt(now, p.at, p.holder, p.o)
				if a.Released != had || fmt.Sprint(a.Wake) != fmt.Sprint(orEmpty(wakes)) {
					rt.Fatalf("%s: release of %s sent later answered %+v, model released %v wake %v", op, p.holder, a, had, wakes)
				}
			}
			if len(answers) != 0 {
				rt.Fatalf("%s: %d answers more than the %d releases waiting", op, len(answers), len(pending))
			}
			touched = touched || len(pending) > 0
			pending = nil
		}
		answer := func(r capacity.WindowRelease) { answers <- r }
		check := func(op string) {
			if !touched {
				return
			}
			st, err := w.State(ctx, scope)
			if err != nil {
				rt.Fatal(err)
			}
			m.load(clk.Now().UnixMilli())
			if st.Size != m.size || st.Target != m.target || st.InFlight != len(m.inflight) || st.Waiting != len(m.waitOrder) ||
				st.Phase != m.phase || st.Proven != m.proven || st.Ceiling != m.ceiling || st.HoldMS != m.hold {
				rt.Fatalf("after %s: redis %+v, model size %d target %d in flight %d waiting %d phase %s proven %d ceiling %d hold %dms",
					op, st, m.size, m.target, len(m.inflight), len(m.waitOrder), m.phase, m.proven, m.ceiling, m.hold)
			}
			if planMax > 0 && st.Size > planMax {
				rt.Fatalf("window %d above the plan limit %d", st.Size, planMax)
			}
			if st.Size < 1 {
				rt.Fatalf("window %d below 1", st.Size)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"acquire": func(rt *rapid.T) {
				h := rapid.SampledFrom(holders).Draw(rt, "holder")
				ln := rapid.SampledFrom([]capacity.Lane{lane.Immediate, lane.Batch}).Draw(rt, "lane")
				laneNum := int64(0)
				if ln == lane.Batch {
					laneNum = 1
				}
				dl := clk.Now().Add(time.Duration(rapid.IntRange(1, 100).Draw(rt, "deadline_s")) * time.Second)
				var nb time.Time
				if rapid.IntRange(0, 4).Draw(rt, "deferred") == 0 {
					// Sometimes already past by Redis's clock: the ledger's
					// Until, read a moment before, is not Redis's now.
					nb = clk.Now().Add(time.Duration(rapid.IntRange(-300, 3000).Draw(rt, "nb_ms")) * time.Millisecond)
				}
				probe := rapid.IntRange(0, 9).Draw(rt, "probe") == 0
				g := w.Acquire(ctx, capacity.WindowRequest{Scope: scope, Holder: h, Lane: ln, Deadline: dl, NotBefore: nb, Probe: probe, Max: planMax,
					JobID: jobOf(h)})
				sent(rt, "acquire "+h)
				touched = true
				nbMs := int64(0)
				if !nb.IsZero() {
					nbMs = nb.UnixMilli()
				}
				ok, wait, wakes := m.acquire(clk.Now().UnixMilli(), h, ln, laneNum*1e13+dl.UnixMilli(), nbMs, probe, jobOf(h))
				if g.Granted != ok || (!ok && g.Wait != time.Duration(wait)*time.Millisecond) || fmt.Sprint(g.Wake) != fmt.Sprint(orEmpty(wakes)) {
					rt.Fatalf("acquire %s lane %v: redis granted %v wait %v wake %v, model %v wait %dms wake %v", h, ln, g.Granted, g.Wait, g.Wake, ok, wait, wakes)
				}
				if g.Target != m.target {
					rt.Fatalf("acquire %s: redis says target %d, model %d", h, g.Target, m.target)
				}
				check("acquire " + h)
			},
			"release": func(rt *rapid.T) {
				h := rapid.SampledFrom(holders).Draw(rt, "holder")
				o := capacity.Outcome(rapid.IntRange(0, 3).Draw(rt, "outcome"))
				r := w.Release(ctx, scope, h, o, "429", planMax)
				sent(rt, "release "+h)
				touched = true
				if wakes := m.release(clk.Now().UnixMilli(), h, o); fmt.Sprint(r.Wake) != fmt.Sprint(orEmpty(wakes)) {
					rt.Fatalf("release %s: redis wakes %v, model %v", h, r.Wake, wakes)
				}
				check("release " + h)
			},
			"release later": func(rt *rapid.T) {
				h := rapid.SampledFrom(holders).Draw(rt, "holder")
				o := capacity.Outcome(rapid.IntRange(0, 3).Draw(rt, "outcome"))
				pending = append(pending, pendingRelease{h, o, clk.Now().UnixMilli()})
				w.ReleaseLater(ctx, scope, h, o, "429", planMax, nil, capacity.Lease{}, answer)
				if o == capacity.Overload || o == capacity.Refused {
					sent(rt, "release later "+h) // goes at once, after those waiting
				}
				check("release later " + h)
			},
			"flush": func(rt *rapid.T) {
				w.Flush(ctx)
				sent(rt, "flush")
				check("flush")
			},
			"cooldown": func(rt *rapid.T) {
				w.Cooldown(ctx, scope, "429 with Retry-After", planMax)
				sent(rt, "cooldown")
				touched = true
				m.cooldown(clk.Now().UnixMilli())
				check("cooldown")
			},
			"advance": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(1, 3000).Draw(rt, "ms")) * time.Millisecond)
			},
			"restart": func(rt *rapid.T) {
				w = newWin()
				pending = nil // lost with the process
			},
		})
	})
}

// jobOf is holder h's River job id in the property test.
func jobOf(h string) int64 { return int64(h[0]-'a') + 1 }

func orEmpty(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}
