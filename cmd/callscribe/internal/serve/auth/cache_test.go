package auth_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/internal/fielderr"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
)

// syncBuffer is a log destination safe for the cache's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cacheBundle is a cache whose database connections go through a proxy
// the test can cut, and the owner's store on the database itself.
type cacheBundle struct {
	owner *auth.Store
	proxy *testdb.Proxy
	store *auth.Store
	cache *auth.Cache
	log   *syncBuffer
	pool  *pgxpool.Pool // the database, directly
	// pre: the secrets of the tokens made before the cache, one per
	// tenant given to setupCache.
	pre []string
}

// setupCache makes a token for each of tenants, then the cache.
func setupCache(t *testing.T, cfg auth.CacheConfig, tenants ...string) cacheBundle {
	t.Helper()
	pool := testdb.New(t)
	b := cacheBundle{owner: auth.New(pool), proxy: testdb.NewProxy(t, pool), log: &syncBuffer{}, pool: pool}
	for _, tenant := range tenants {
		_, secret := b.create(t, tenant, false)
		b.pre = append(b.pre, secret)
	}
	pcfg, err := pgxpool.ParseConfig(b.proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	pcfg.MaxConns = auth.CachePoolMaxConns
	pcfg.ConnConfig.ConnectTimeout = 2 * time.Second
	cpool, err := pgxpool.NewWithConfig(t.Context(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cpool.Close)
	b.store = auth.New(cpool)
	cfg.Logger = slog.New(slog.NewTextHandler(b.log, nil))
	b.cache, err = auth.NewCache(t.Context(), b.store, cpool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.cache.Close)
	return b
}

// create makes a token as the owner, on the database directly.
func (b cacheBundle) create(t *testing.T, tenant string, admin bool) (auth.Token, string) {
	t.Helper()
	tok, secret, err := b.owner.Create(context.Background(), tenant, "", admin)
	if err != nil {
		t.Fatal(err)
	}
	return tok, secret
}

// poll is a signal for testwait.Until that fires every 10ms.
func poll(t *testing.T) <-chan time.Time {
	tick := time.NewTicker(10 * time.Millisecond)
	t.Cleanup(tick.Stop)
	return tick.C
}

func mustAccept(t *testing.T, c *auth.Cache, secret, tenant string) {
	t.Helper()
	p, err := c.Authenticate(context.Background(), secret)
	if err != nil || p.Tenant != tenant {
		t.Fatalf("token of %q: %+v, %v; want accepted", tenant, p, err)
	}
}

// The database cut mid-run: every token the cache has read keeps working
// (counted stale and logged once per token, without the token), a token
// it does not know gets an error that is not ErrInvalid (the capacity API
// answers 503), a wrong secret or a malformed token is still ErrInvalid,
// and a token revoked during the outage keeps working until the database
// is back, then is refused without the refresh interval (1h) passing: the
// cache re-reads every token as it listens again.
func TestCacheThroughDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupCache(t, auth.CacheConfig{RefreshEvery: time.Hour, LookupTimeout: 2 * time.Second}, "acme")
	// The cache read acme's token at start; beta's is newer, so its first
	// use asks the database.
	beforeA := b.pre[0]
	if !b.cache.InStep() {
		t.Fatalf("a cache on a live database is not in step:\n%s", b.log)
	}
	mustAccept(t, b.cache, beforeA, "acme")
	_, beta := b.create(t, "beta", false)
	mustAccept(t, b.cache, beta, "beta")
	mustAccept(t, b.cache, beta, "beta")
	if got := [3]uint64{b.cache.Accepted(auth.SourceCache), b.cache.Accepted(auth.SourceStale), b.cache.Accepted(auth.SourceDatabase)}; got != [3]uint64{2, 0, 1} {
		t.Fatalf("accepted (cache, stale, database) = %v, want [2 0 1]", got)
	}

	b.proxy.Cut()
	if !testwait.Until(30*time.Second, poll(t), func() bool { return !b.cache.InStep() }) {
		t.Fatal("the cache did not notice the database was cut")
	}
	for range 5 {
		mustAccept(t, b.cache, beforeA, "acme")
		mustAccept(t, b.cache, beta, "beta")
	}
	if got := b.cache.Accepted(auth.SourceStale); got != 10 {
		t.Errorf("accepted stale = %d, want 10", got)
	}
	// Logged once per token, by id, never the token.
	log := b.log.String()
	if n := strings.Count(log, "token accepted from the cache while the database cannot be reached"); n != 2 {
		t.Errorf("%d stale acceptances logged, want 2 (once per token):\n%s", n, log)
	}
	for _, secret := range []string{beforeA, beta} {
		if strings.Contains(log, secret[len(secret)-64:]) {
			t.Fatalf("the log holds a token's secret:\n%s", log)
		}
	}

	// A token the cache never saw: the database cannot tell, so an error
	// (503), not ErrInvalid (401), within the lookup timeout.
	_, gamma := b.create(t, "gamma", false)
	start := time.Now()
	if _, err := b.cache.Authenticate(ctx, gamma); err == nil || errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("an unseen token during the outage: %v, want a lookup error", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the lookup of an unseen token took %s", took)
	}
	failures := b.store.Failures()
	wrong := beforeA[:len(beforeA)-1] + map[bool]string{true: "0", false: "1"}[beforeA[len(beforeA)-1] != '0']
	for _, bad := range []string{wrong, "nonsense", ""} {
		if _, err := b.cache.Authenticate(ctx, bad); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("token %.12q during the outage: %v, want ErrInvalid", bad, err)
		}
	}
	if got := b.store.Failures() - failures; got != 3 {
		t.Errorf("failures counted during the outage: %d, want 3", got)
	}

	// Revoked while the cache cannot hear of it: still accepted (fail
	// open), until the database is back.
	betaID := tokenID(t, beta)
	if _, err := b.owner.Revoke(ctx, betaID); err != nil {
		t.Fatal(err)
	}
	mustAccept(t, b.cache, beta, "beta")
	b.proxy.Restore()
	if !testwait.Until(60*time.Second, poll(t), func() bool {
		_, err := b.cache.Authenticate(ctx, beta)
		return errors.Is(err, auth.ErrInvalid)
	}) {
		t.Fatalf("a token revoked during the outage still works after the database came back:\n%s", b.log)
	}
	if !testwait.Until(30*time.Second, poll(t), b.cache.InStep) {
		t.Fatal("the cache is not in step again")
	}
	mustAccept(t, b.cache, beforeA, "acme")
	mustAccept(t, b.cache, gamma, "gamma")
}

// A revocation reaches the cache by notice: with a refresh interval of an
// hour, the revoked token is refused within seconds; the tenant's other
// token keeps working.
func TestCacheRevocationNotified(t *testing.T) {
	t.Parallel()
	b := setupCache(t, auth.CacheConfig{RefreshEvery: time.Hour})
	_, secret := b.create(t, "acme", false)
	_, other := b.create(t, "acme", false)
	mustAccept(t, b.cache, secret, "acme")
	mustAccept(t, b.cache, other, "acme")
	if _, err := b.owner.Revoke(context.Background(), tokenID(t, secret)); err != nil {
		t.Fatal(err)
	}
	if !testwait.Until(30*time.Second, poll(t), func() bool {
		_, err := b.cache.Authenticate(context.Background(), secret)
		return errors.Is(err, auth.ErrInvalid)
	}) {
		t.Fatalf("a revoked token still works:\n%s", b.log)
	}
	mustAccept(t, b.cache, other, "acme")
	if strings.Contains(b.log.String(), "lost the database's revocation notices") {
		t.Fatalf("the cache lost its listener; the notice is not what refused the token:\n%s", b.log)
	}
}

// A revocation whose notice never came (the trigger disabled) is applied
// by the periodic re-read of every token.
func TestCacheRefreshAppliesMissedRevocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupCache(t, auth.CacheConfig{RefreshEvery: 200 * time.Millisecond})
	_, secret := b.create(t, "acme", false)
	mustAccept(t, b.cache, secret, "acme")
	if _, err := b.pool.Exec(ctx, "ALTER TABLE api_tokens DISABLE TRIGGER api_token_notify_revoked"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.owner.Revoke(ctx, tokenID(t, secret)); err != nil {
		t.Fatal(err)
	}
	if !testwait.Until(30*time.Second, poll(t), func() bool {
		_, err := b.cache.Authenticate(ctx, secret)
		return errors.Is(err, auth.ErrInvalid)
	}) {
		t.Fatalf("a revocation without its notice was not applied by the refresh:\n%s", b.log)
	}
}

// tokens.refresh_every and tokens.lookup_timeout: defaults, bounds, and
// errors naming the field.
func TestCacheConfig(t *testing.T) {
	t.Parallel()
	d := auth.CacheConfig{}.WithDefaults()
	if d.RefreshEvery != 30*time.Second || d.LookupTimeout != time.Second || d.Validate() != nil {
		t.Fatalf("defaults: %+v, %v", d, d.Validate())
	}
	for _, c := range []struct {
		cfg   auth.CacheConfig
		field string
	}{
		{auth.CacheConfig{RefreshEvery: 50 * time.Millisecond}, "RefreshEvery"},
		{auth.CacheConfig{RefreshEvery: 2 * time.Hour}, "RefreshEvery"},
		{auth.CacheConfig{RefreshEvery: -time.Second}, "RefreshEvery"},
		{auth.CacheConfig{LookupTimeout: time.Millisecond}, "LookupTimeout"},
		{auth.CacheConfig{LookupTimeout: time.Minute}, "LookupTimeout"},
	} {
		err := c.cfg.WithDefaults().Validate()
		var fe *fielderr.Error
		if !errors.As(err, &fe) || fielderr.String(fe.Path) != c.field {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.field)
		}
	}
	for _, ok := range []auth.CacheConfig{{RefreshEvery: 100 * time.Millisecond, LookupTimeout: 10 * time.Millisecond}, {RefreshEvery: time.Hour, LookupTimeout: 30 * time.Second}} {
		if err := ok.WithDefaults().Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// tokenID is the id part of a token "cs_<id>_<secret>".
func tokenID(t *testing.T, token string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(strings.Split(token, "_")[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
