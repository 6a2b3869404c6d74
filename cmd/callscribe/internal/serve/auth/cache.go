package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth/internal/dbsqlc"
	"github.com/callscribe/callscribe/internal/fielderr"
)

// Defaults and bounds of CacheConfig.
const (
	RefreshEveryDefault  = 30 * time.Second
	RefreshEveryMin      = 100 * time.Millisecond
	RefreshEveryMax      = time.Hour
	LookupTimeoutDefault = time.Second
	LookupTimeoutMin     = 10 * time.Millisecond
	LookupTimeoutMax     = 30 * time.Second
)

// CachePoolMaxConns is the size of the pool a Cache is meant to be given
// (serve opens it so): the lookups of tokens not yet cached and the
// refreshes, never the workers' requests. The listener's connection is
// taken from it and then no longer counts against it.
const CachePoolMaxConns = 4

// RevokedChannel is the PostgreSQL notification channel on which every
// revocation of a token is announced, its id as the payload (the trigger
// of migration 00017).
const RevokedChannel = "api_token_revoked"

// StaleLogEvery is how often, at most, one token accepted from the cache
// while the database cannot be reached is logged.
const StaleLogEvery = time.Minute

// Where an accepted token was found (Cache.Accepted).
const (
	// SourceCache: in the cache, in step with the database (listening to
	// its revocations, its last refresh done).
	SourceCache = "cache"
	// SourceStale: in the cache while the database cannot be reached (no
	// revocation notices, or the last refresh failed).
	SourceStale = "stale"
	// SourceDatabase: not cached yet, looked up in the database.
	SourceDatabase = "database"
)

// Sources are the values of Cache.Accepted's source, in a fixed order.
var Sources = []string{SourceCache, SourceStale, SourceDatabase}

// refreshTimeout bounds one read of every token; listenBackoffMax caps the
// wait between two attempts to listen again.
const (
	refreshTimeout   = 10 * time.Second
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// CacheConfig configures a Cache. The yaml keys are those of callscribe's
// configuration file (its tokens section).
type CacheConfig struct {
	// RefreshEvery is how often the cache re-reads every token, so that a
	// revocation whose notice was missed is applied within it. The cache
	// also re-reads them each time it starts listening again. Default 0:
	// RefreshEveryDefault (30s); at least 100ms, at most 1h.
	RefreshEvery time.Duration `yaml:"refresh_every"`
	// LookupTimeout bounds the lookup of a token the cache has not seen
	// (connecting included); the request is then answered as if the
	// database were down. Default 0: LookupTimeoutDefault (1s); at least
	// 10ms, at most 30s.
	LookupTimeout time.Duration `yaml:"lookup_timeout"`
	// Logger receives the cache's warnings (never a token). Default nil:
	// discard.
	Logger *slog.Logger `yaml:"-"`
	// Clock paces the warnings. Default nil: clock.System.
	Clock clock.Clock `yaml:"-"`
}

// WithDefaults returns c with every zero field set to its default.
func (c CacheConfig) WithDefaults() CacheConfig {
	c.RefreshEvery = cmp.Or(c.RefreshEvery, RefreshEveryDefault)
	c.LookupTimeout = cmp.Or(c.LookupTimeout, LookupTimeoutDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.Clock = cmp.Or[clock.Clock](c.Clock, clock.System{})
	return c
}

// Validate reports every problem with c (after WithDefaults), each a
// *fielderr.Error naming the field.
func (c CacheConfig) Validate() error {
	var errs []error
	if c.RefreshEvery < RefreshEveryMin || c.RefreshEvery > RefreshEveryMax {
		errs = append(errs, fielderr.Errorf("RefreshEvery", "%s must be within %s..%s (unset: %s)", c.RefreshEvery, RefreshEveryMin, RefreshEveryMax, RefreshEveryDefault))
	}
	if c.LookupTimeout < LookupTimeoutMin || c.LookupTimeout > LookupTimeoutMax {
		errs = append(errs, fielderr.Errorf("LookupTimeout", "%s must be within %s..%s (unset: %s)", c.LookupTimeout, LookupTimeoutMin, LookupTimeoutMax, LookupTimeoutDefault))
	}
	return errors.Join(errs...)
}

// Cache answers for the tokens of a Store from memory, so that a request
// checked by it never waits on PostgreSQL for a token it knows: the
// capacity API's, whose live calls must outlive a database outage.
//
// It holds every token's id, the SHA-256 of its secret (never the secret),
// its tenant and whether it is revoked: read all at start, re-read every
// RefreshEvery and each time it starts listening again, and a token not
// yet known is looked up on first use (on the cache's own pool, within
// LookupTimeout) and kept. Revocations are pushed by PostgreSQL
// (RevokedChannel) to a connection that listens for them. A token is
// never changed but revoked, and never un-revoked (the table's guard), so
// merging a read into the cache only ever adds tokens and revocations: a
// read that started before a revocation cannot bring the token back.
//
// While the database cannot be reached, a known token that is not known to
// be revoked keeps working (counted as SourceStale and logged, at most
// once a StaleLogEvery per token); a token the cache does not know gets
// the lookup's error (the capacity API answers 503), and one it knows to
// be revoked, or whose secret does not match, ErrInvalid.
//
// Refusals are counted in the Store's Failures. It is safe for concurrent
// use; Close stops it.
type Cache struct {
	store *Store
	pool  *pgxpool.Pool
	q     *dbsqlc.Queries
	cfg   CacheConfig

	mu     sync.RWMutex
	tokens map[int64]cachedToken

	// listening: a connection listens on RevokedChannel; refreshed: the
	// last read of every token succeeded. In step: both.
	listening atomic.Bool
	refreshed atomic.Bool

	logMu  sync.Mutex
	logged map[int64]time.Time

	accepted [3]atomic.Uint64 // by Sources' order

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// cachedToken is what the cache keeps of a token: never its secret.
type cachedToken struct {
	sum     [sha256.Size]byte
	tenant  string
	admin   bool
	revoked bool
}

// NewCache returns a Cache of s's tokens, read through pool (its own
// small pool of CachePoolMaxConns: see the type's comment), and starts
// listening for revocations and refreshing. It reads every token once
// before it returns; when that fails (the database is down) it starts
// empty and keeps trying. Close it when done.
func NewCache(ctx context.Context, s *Store, pool *pgxpool.Pool, cfg CacheConfig) (*Cache, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("token cache config: %w", err)
	}
	c := &Cache{store: s, pool: pool, q: dbsqlc.New(), cfg: cfg, tokens: map[int64]cachedToken{}, logged: map[int64]time.Time{}}
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	c.stop = stop
	conn, err := c.listen(ctx)
	if err != nil {
		cfg.Logger.Warn("token cache: cannot listen for revocations yet; retrying", slog.String("error", err.Error()))
	}
	c.wg.Go(func() { c.listenLoop(run, conn) })
	c.wg.Go(func() { c.refreshLoop(run) })
	return c, nil
}

// Close stops listening and refreshing. The cache still answers from what
// it holds, as if the database were down.
func (c *Cache) Close() {
	c.stop()
	c.wg.Wait()
}

// InStep reports whether the cache is in step with the database: it
// listens for revocations and its last read of every token succeeded.
func (c *Cache) InStep() bool { return c.listening.Load() && c.refreshed.Load() }

// Accepted counts the tokens accepted since the cache was made, by source
// (SourceCache, SourceStale, SourceDatabase); refusals are the Store's
// Failures.
func (c *Cache) Accepted(source string) uint64 {
	for i, s := range Sources {
		if s == source {
			return c.accepted[i].Load()
		}
	}
	return 0
}

// Authenticate returns whom bearer speaks for, or ErrInvalid (counted in
// the Store's Failures), from the cache when it knows the token's id;
// otherwise it looks the token up (within LookupTimeout) and returns the
// lookup's error when the database cannot answer. The secret's hash is
// compared in constant time.
func (c *Cache) Authenticate(ctx context.Context, bearer string) (Principal, error) {
	m := tokenRE.FindStringSubmatch(strings.TrimSpace(bearer))
	if m == nil {
		return c.store.fail()
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return c.store.fail()
	}
	sum := sha256.Sum256([]byte(m[2]))
	c.mu.RLock()
	t, ok := c.tokens[id]
	c.mu.RUnlock()
	source := SourceCache
	if !ok {
		lctx, cancel := context.WithTimeout(ctx, c.cfg.LookupTimeout)
		row, err := c.q.TokenGet(lctx, c.pool, id)
		cancel()
		if errors.Is(err, pgx.ErrNoRows) {
			return c.store.fail()
		}
		if err != nil {
			return Principal{}, fmt.Errorf("tokens: looking up token %d: %w", id, err)
		}
		t = c.merge([]dbsqlc.ApiToken{row})[id]
		source = SourceDatabase
	}
	if t.revoked || subtle.ConstantTimeCompare(sum[:], t.sum[:]) != 1 {
		return c.store.fail()
	}
	if source == SourceCache && !c.InStep() {
		source = SourceStale
		c.logStale(id, t)
	}
	for i, s := range Sources {
		if s == source {
			c.accepted[i].Add(1)
		}
	}
	return Principal{TokenID: id, Tenant: t.tenant, Admin: t.admin}, nil
}

// logStale logs token id accepted from the cache while the database cannot
// be reached, at most once a StaleLogEvery.
func (c *Cache) logStale(id int64, t cachedToken) {
	now := c.cfg.Clock.Now()
	c.logMu.Lock()
	last, seen := c.logged[id]
	if seen && now.Sub(last) < StaleLogEvery {
		c.logMu.Unlock()
		return
	}
	c.logged[id] = now
	c.logMu.Unlock()
	c.cfg.Logger.Warn("token cache: token accepted from the cache while the database cannot be reached",
		slog.Int64("token_id", id), slog.String("tenant", t.tenant), slog.Bool("admin", t.admin))
}

// merge adds rows to the cache and returns what it holds for their ids: a
// token already revoked stays revoked, whatever the row says.
func (c *Cache) merge(rows []dbsqlc.ApiToken) map[int64]cachedToken {
	out := make(map[int64]cachedToken, len(rows))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rows {
		t := cachedToken{admin: r.Admin, revoked: r.RevokedAt != nil || c.tokens[r.ID].revoked}
		copy(t.sum[:], r.SecretSha256)
		if r.TenantID != nil {
			t.tenant = *r.TenantID
		}
		c.tokens[r.ID] = t
		out[r.ID] = t
	}
	return out
}

// revoke marks token id revoked (known or not: a later request with it is
// refused without asking the database).
func (c *Cache) revoke(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tokens[id]
	t.revoked = true
	c.tokens[id] = t
}

// refresh reads every token into the cache.
func (c *Cache) refresh(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	rows, err := c.q.TokenList(rctx, c.pool)
	if err != nil {
		c.refreshed.Store(false)
		return fmt.Errorf("tokens: reading every token: %w", err)
	}
	c.merge(rows)
	c.refreshed.Store(true)
	return nil
}

// refreshLoop re-reads every token every RefreshEvery until ctx ends.
func (c *Cache) refreshLoop(ctx context.Context) {
	tick := time.NewTicker(c.cfg.RefreshEvery)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := c.refresh(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			c.cfg.Logger.Warn("token cache: cannot re-read the tokens; known tokens keep working from the cache", slog.String("error", err.Error()))
		case err == nil && failing:
			c.cfg.Logger.Info("token cache: the tokens are read again")
		}
		failing = err != nil
	}
}

// listen takes a connection of the pool for itself, listens on
// RevokedChannel, then reads every token (so that no revocation made
// before it listened is missed) and returns the connection.
func (c *Cache) listen(ctx context.Context) (*pgx.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.LookupTimeout)
	pc, err := c.pool.Acquire(actx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("tokens: connecting to listen for revocations: %w", err)
	}
	conn := pc.Hijack()
	lctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	if _, err := conn.Exec(lctx, "LISTEN "+pgx.Identifier{RevokedChannel}.Sanitize()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("tokens: listening for revocations: %w", err)
	}
	if err := c.refresh(ctx); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	c.listening.Store(true)
	return conn, nil
}

// listenLoop applies the revocations announced on conn, and when conn is
// lost (or nil) listens again, waiting longer after each failure (up to
// listenBackoffMax), until ctx ends.
func (c *Cache) listenLoop(ctx context.Context, conn *pgx.Conn) {
	wait := listenBackoffMin
	lost := conn == nil
	for ctx.Err() == nil {
		if conn == nil {
			var err error
			if conn, err = c.listen(ctx); err != nil {
				if !clock.Sleep(ctx, wait) {
					return
				}
				wait = min(2*wait, listenBackoffMax)
				continue
			}
			wait = listenBackoffMin
			if lost {
				c.cfg.Logger.Info("token cache: listening for revocations again; the tokens are read again")
				lost = false
			}
		}
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			c.listening.Store(false)
			_ = conn.Close(context.WithoutCancel(ctx))
			conn = nil
			if ctx.Err() == nil {
				c.cfg.Logger.Warn("token cache: lost the database's revocation notices; known tokens keep working from the cache until it listens again",
					slog.String("error", err.Error()))
				lost = true
			}
			continue
		}
		id, err := strconv.ParseInt(n.Payload, 10, 64)
		if err != nil {
			c.cfg.Logger.Warn("token cache: a revocation notice that names no token id; ignored", slog.Int("payload_bytes", len(n.Payload)))
			continue
		}
		c.revoke(id)
	}
	if conn != nil {
		c.listening.Store(false)
		_ = conn.Close(context.WithoutCancel(ctx))
	}
}
