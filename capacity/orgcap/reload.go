package orgcap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

// Defaults of ReloaderConfig.
const (
	// EveryDefault is how often a Reloader re-reads the stored caps: a
	// change reaches every process within about this.
	EveryDefault = 2 * time.Second
	// EveryMin is the shortest ReloaderConfig.Every accepted.
	EveryMin = 10 * time.Millisecond
	// ReadTimeoutDefault bounds one read of the stored caps.
	ReadTimeoutDefault = 2 * time.Second
	// WarnIntervalDefault is how often, at most, a Reloader logs that it
	// cannot read the caps.
	WarnIntervalDefault = time.Minute
)

// ReloaderConfig configures NewReloader.
type ReloaderConfig struct {
	// Every is how often the stored caps are re-read. Default 0:
	// EveryDefault (2s); at least EveryMin.
	Every time.Duration
	// ReadTimeout bounds one read. Default 0: ReadTimeoutDefault (2s).
	ReadTimeout time.Duration
	// WarnInterval is how often, at most, a failed read is logged.
	// Default 0: WarnIntervalDefault (1m).
	WarnInterval time.Duration
	// Logger receives the changes applied and the failed reads. Default
	// nil: discard.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with each zero field set to its default.
func (c ReloaderConfig) WithDefaults() ReloaderConfig {
	c.Every = cmp.Or(c.Every, EveryDefault)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, ReadTimeoutDefault)
	c.WarnInterval = cmp.Or(c.WarnInterval, WarnIntervalDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate returns an error naming the field c gets wrong.
func (c ReloaderConfig) Validate() error {
	var errs []error
	if c.Every < EveryMin {
		errs = append(errs, fmt.Errorf("ReloaderConfig.Every must be at least %s, got %s", EveryMin, c.Every))
	}
	if c.ReadTimeout <= 0 {
		errs = append(errs, fmt.Errorf("ReloaderConfig.ReadTimeout must be positive, got %s", c.ReadTimeout))
	}
	if c.WarnInterval <= 0 {
		errs = append(errs, fmt.Errorf("ReloaderConfig.WarnInterval must be positive, got %s", c.WarnInterval))
	}
	return errors.Join(errs...)
}

// Reloader feeds a capacity.Slots the stored caps, re-read in the
// background: acquiring a slot never waits for it.
type Reloader struct {
	store *Store
	slots *capacity.Slots
	cfg   ReloaderConfig

	// mu makes Loads one at a time; it guards what follows.
	mu sync.Mutex
	// applied is the table last handed to the Slots; nil before the first
	// read that succeeded.
	applied  map[string]capacity.OrgSlots
	failing  bool
	lastWarn time.Time
}

// NewReloader returns a Reloader of store's caps into slots. It returns an
// error naming the field cfg gets wrong.
func NewReloader(store *Store, slots *capacity.Slots, cfg ReloaderConfig) (*Reloader, error) {
	if store == nil || slots == nil {
		return nil, errors.New("orgcap.NewReloader: store and slots are required")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Reloader{store: store, slots: slots, cfg: cfg}, nil
}

// Load reads the stored caps once and applies them; on error the caps
// applied before stand. Start calls it before it returns, so that a
// process serves with the stored caps from the first call.
func (r *Reloader) Load(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ReadTimeout)
	defer cancel()
	table, err := r.store.Table(ctx)
	if err != nil {
		r.noteFailure(err)
		return err
	}
	if r.failing {
		r.failing = false
		r.cfg.Logger.Info("stored caps readable again")
	}
	if r.applied != nil && equalTables(r.applied, table) {
		return nil
	}
	if err := r.slots.SetStoredCaps(table); err != nil {
		r.noteFailure(err)
		return err
	}
	campaigns := 0
	for _, o := range table {
		campaigns += len(o.Campaigns)
	}
	r.cfg.Logger.Info("stored caps applied", slog.Int("orgs", len(table)), slog.Int("campaigns", campaigns))
	r.applied = table
	return nil
}

// noteFailure logs a failed read at most once per WarnInterval.
func (r *Reloader) noteFailure(err error) {
	now := time.Now()
	if r.failing && now.Sub(r.lastWarn) < r.cfg.WarnInterval {
		return
	}
	r.failing, r.lastWarn = true, now
	r.cfg.Logger.Warn("reading the stored caps failed: the caps read before stand",
		slog.String("error", err.Error()), slog.Duration("retry_every", r.cfg.Every))
}

// Run re-reads the stored caps every ReloaderConfig.Every until ctx ends.
func (r *Reloader) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = r.Load(ctx)
		}
	}
}

// Start loads the stored caps once (a failure is logged: the configured
// caps stand) and runs the Reloader in the background until stop is
// called; stop returns once it has stopped.
func (r *Reloader) Start(ctx context.Context) (stop func()) {
	_ = r.Load(ctx)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	return func() { cancel(); <-done }
}

func equalTables(a, b map[string]capacity.OrgSlots) bool {
	return maps.EqualFunc(a, b, func(x, y capacity.OrgSlots) bool {
		return x.Limit == y.Limit && maps.Equal(x.Campaigns, y.Campaigns)
	})
}
