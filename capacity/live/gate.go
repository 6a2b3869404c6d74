package live

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// GateTimeoutDefault is how long Gate.Enter waits for room by default.
const GateTimeoutDefault = 4 * time.Second

// ErrGateFull is what Gate.Enter returns when no room freed up within the
// admission timeout: the call goes to the overflow path instead of hanging
// inside a pool.
var ErrGateFull = errors.New("capacity: admission gate full")

// GateConfig configures NewGate.
type GateConfig struct {
	// Size is how many calls may hold per-call resources at once in this
	// process. Required: more than 0 and less than every ceiling.
	Size int
	// Ceilings names the per-process pools behind the gate and their
	// sizes, such as {"db_pool": 40, "stt_sockets": 100}. Required: at
	// least one, each more than 0.
	Ceilings map[string]int
	// Timeout is how long Enter waits for room before rejecting.
	// Default 0: GateTimeoutDefault (4s). Negative: reject at once.
	Timeout time.Duration
	// Overflow, when set, is called with Enter's context for each rejected
	// call (before Enter returns ErrGateFull), say to play a busy message.
	// Default nil: none.
	Overflow func(ctx context.Context)
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c GateConfig) WithDefaults() GateConfig {
	if c.Timeout == 0 {
		c.Timeout = GateTimeoutDefault
	}
	return c
}

func (c GateConfig) validate() error {
	if c.Size <= 0 {
		return fmt.Errorf("GateConfig.Size must be more than 0, got %d", c.Size)
	}
	if len(c.Ceilings) == 0 {
		return errors.New("GateConfig.Ceilings must name at least one per-call resource pool")
	}
	names := make([]string, 0, len(c.Ceilings))
	for name := range c.Ceilings {
		names = append(names, name)
	}
	sort.Strings(names)
	smallest := ""
	for _, name := range names {
		n := c.Ceilings[name]
		if n <= 0 {
			return fmt.Errorf("GateConfig.Ceilings[%q] must be more than 0, got %d", name, n)
		}
		if smallest == "" || n < c.Ceilings[smallest] {
			smallest = name
		}
	}
	if c.Size >= c.Ceilings[smallest] {
		return fmt.Errorf("GateConfig.Size %d must be below the smallest ceiling, %s = %d", c.Size, smallest, c.Ceilings[smallest])
	}
	return nil
}

// Gate is a per-process admission gate in front of every per-call
// resource (database connection, STT socket, TTS socket). It is sized
// below the smallest of those pools, so that a call waits visibly here,
// or is rejected to an overflow path, instead of hanging inside a pool.
// It uses no Redis and is safe for concurrent use.
type Gate struct {
	cfg      GateConfig
	sem      chan struct{}
	waiting  atomic.Int64
	rejected atomic.Int64
}

// NewGate returns a Gate, or an error naming the field cfg gets wrong
// (for Size, the smallest ceiling).
func NewGate(cfg GateConfig) (*Gate, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Gate{cfg: cfg, sem: make(chan struct{}, cfg.Size)}, nil
}

// Enter admits a call, waiting up to the configured timeout for room. It
// returns release, which lets the next call in and is safe to call more
// than once. If no room frees up in time it counts a rejection, calls
// Overflow if set, and returns ErrGateFull; if ctx ends first, ctx's error.
func (g *Gate) Enter(ctx context.Context) (release func(), err error) {
	return g.EnterWithin(ctx, g.cfg.Timeout)
}

// EnterWithin is Enter waiting up to timeout instead of the configured
// timeout (0 or negative: no wait, reject at once when full).
func (g *Gate) EnterWithin(ctx context.Context, timeout time.Duration) (release func(), err error) {
	select {
	case g.sem <- struct{}{}:
		return g.releaser(), nil
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("entering admission gate: %w", err)
	}
	if timeout > 0 {
		g.waiting.Add(1)
		timer := time.NewTimer(timeout)
		select {
		case g.sem <- struct{}{}:
			timer.Stop()
			g.waiting.Add(-1)
			return g.releaser(), nil
		case <-ctx.Done():
			timer.Stop()
			g.waiting.Add(-1)
			return nil, fmt.Errorf("entering admission gate: %w", ctx.Err())
		case <-timer.C:
			g.waiting.Add(-1)
		}
	}
	g.rejected.Add(1)
	if g.cfg.Overflow != nil {
		g.cfg.Overflow(ctx)
	}
	return nil, fmt.Errorf("no room among %d calls after %s: %w", g.cfg.Size, max(timeout, 0), ErrGateFull)
}

func (g *Gate) releaser() func() {
	var once sync.Once
	return func() { once.Do(func() { <-g.sem }) }
}

// Waiting returns how many calls are waiting in Enter now (a gauge).
func (g *Gate) Waiting() int64 { return g.waiting.Load() }

// Rejected returns how many calls Enter has rejected (a counter).
func (g *Gate) Rejected() int64 { return g.rejected.Load() }

// InUse returns how many calls are inside the gate now.
func (g *Gate) InUse() int { return len(g.sem) }

// Timeout returns how long Enter waits for room.
func (g *Gate) Timeout() time.Duration { return g.cfg.Timeout }

// Size returns how many calls the gate admits at once.
func (g *Gate) Size() int { return g.cfg.Size }
