package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/capacity/orgcap"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/ingest"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/status"
	"github.com/callscribe/callscribe/docs"
	"github.com/callscribe/callscribe/internal/route"
	"github.com/callscribe/callscribe/migrations"
)

// Defaults of `callscribe serve`.
const (
	// AddrDefault is where serve listens unless told otherwise.
	AddrDefault = "127.0.0.1:8081"
	// ShutdownGrace is how long in-flight requests get after Ctrl-C.
	ShutdownGrace = 10 * time.Second
)

// Deps are what a Server is built from.
type Deps struct {
	// App gives the configuration, the logger, the process's environment
	// and the openers of the pool, the pipeline and capacity.
	App *app.App
	// Addr is host:port to listen on (port 0: any free port).
	Addr string
	// Workers runs the pipeline's workers beside the APIs (needs
	// database_url).
	Workers bool
}

// Server is `callscribe serve`: the recordings API, the capacity and
// live-call API, /metrics, River UI, the status page and the OpenAPI
// document describing them all (/openapi.json) on one mux, with the
// pipeline's workers. New opens what it serves; Run serves it until
// its context ends, then shuts down in order and closes it all.
type Server struct {
	deps    Deps
	handler http.Handler
	// routes are the operations handler serves.
	routes []route.Route
	// shuttingDown is closed as the HTTP server begins to shut down:
	// waiting requests (dial long-polls, slot waits) answer at once.
	shuttingDown chan struct{}
	// pipeline is nil without database_url.
	pipeline *app.Pipeline
	// authenticated: some token is required (tokens in the database or
	// the environment's admin token).
	authenticated bool
	// closers are run in reverse order by Close.
	closers []func()
}

// New opens what the server serves (Redis capacity, and with
// database_url the pool, the pipeline and River UI) and mounts every
// surface on one mux. It refuses to listen beyond loopback without
// authentication. On error what it opened is closed again.
func New(ctx context.Context, d Deps) (_ *Server, err error) {
	a := d.App
	s := &Server{deps: d, shuttingDown: make(chan struct{})}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	leases, rdb, err := a.OpenLeases()
	if err != nil {
		return nil, err
	}
	s.onClose(func() { _ = rdb.Close() })
	stopAlerts, err := a.StartAlertWebhook()
	if err != nil {
		return nil, err
	}
	s.onClose(stopAlerts)
	orgs := make(map[string]capacity.OrgSlots, len(a.Config.Capacity.Orgs))
	for name, o := range a.Config.Capacity.Orgs {
		orgs[name] = capacity.OrgSlots{Limit: o.Limit, Campaigns: o.Campaigns}
	}
	slots, err := capacity.NewSlots(rdb, capacity.SlotsConfig{OrgLimit: a.Config.Capacity.OrgLimit, Orgs: orgs})
	if err != nil {
		return nil, fmt.Errorf("capacity.orgs: %w", err)
	}
	token := a.Env.Getenv(config.EnvAPIToken)
	agents := map[string]live.CallProviders{}
	for name, ag := range a.Config.Capacity.Agents {
		agents[name] = live.CallProviders{STT: ag.STT, TTS: ag.TTS}
	}
	// Call timelines and the dial queue live in Redis, shared by every
	// serve process; each runs a re-checker of the queue.
	timeline, err := live.NewTimeline(rdb, live.TimelineConfig{})
	if err != nil {
		return nil, fmt.Errorf("call timelines: %w", err)
	}
	dialer, err := live.NewDialer(rdb, leases, live.DialerConfig{Timeline: timeline, DetachLeases: true})
	if err != nil {
		return nil, fmt.Errorf("dial queue: %w", err)
	}
	dialCtx, stopDialer := context.WithCancel(context.WithoutCancel(ctx))
	dialerDone := make(chan struct{})
	go func() { defer close(dialerDone); dialer.Run(dialCtx, nil) }()
	s.onClose(func() { stopDialer(); <-dialerDone })
	starts, err := live.NewRateLimiter(rdb, a.Config.Capacity.RateLimiterConfig())
	if err != nil {
		return nil, fmt.Errorf("capacity.start_rate: %w", err)
	}
	callerIDs, err := capacity.NewCallerIDs(rdb, capacity.CallerIDsConfig{})
	if err != nil {
		return nil, err
	}
	opts := httpapi.Options{Logger: a.Logger, Token: token, Agents: agents, Dialer: dialer, Timeline: timeline,
		Starts: starts, CallerIDs: callerIDs,
		OrgLeaseShare: a.Config.Capacity.OrgLeaseShare, MaxDialWaiters: a.Config.Capacity.MaxDialWaiters,
		Shutdown: s.shuttingDown}
	if a.Config.Capacity.Gate.Size > 0 {
		// One semaphore in Redis, shared by every serve process with a
		// gate of this name.
		if opts.Gate, err = live.NewGate(rdb, a.Config.Capacity.GateConfig()); err != nil {
			return nil, fmt.Errorf("capacity.gate: %w", err)
		}
	}
	mux := &routeTable{mux: http.NewServeMux()}
	if a.Config.DatabaseURL != "" {
		caps, stop, err := a.CapsFrom(ctx, leases, rdb)
		if err != nil {
			return nil, err
		}
		s.onClose(stop)
		pool, err := app.ConnectWorkers(ctx, a.Config.DatabaseURL, a.Logger, a.PoolSize())
		if err != nil {
			return nil, err
		}
		// One token store for every API of this process, so that its
		// refusals are counted in one place. The capacity API and /metrics
		// check tokens through the store's cache, on a pool of its own,
		// so that a database outage does not reach a live call; the
		// recordings API, River UI and the status page, which need the
		// database anyway, ask the store.
		store := auth.New(pool)
		tokens, err := s.openTokenCache(ctx, store)
		if err != nil {
			pool.Close()
			return nil, err
		}
		opts.Authenticate = Authenticator(tokens)
		fromStore := Authenticator(store)
		// This process's metrics: its workers' counters, and the global
		// gauges read from the database and Redis.
		replays := new(LateOutbox)
		m := NewMetrics(a, MetricsSources{Pool: pool, Leases: leases, Slots: slots, Windows: caps.Windows, Tokens: store,
			TokenCache: tokens, Replays: replays, Gate: opts.Gate})
		caps.Metrics = m
		e, err := a.PipelineOn(ctx, pool, caps)
		if err != nil {
			pool.Close()
			return nil, err
		}
		s.pipeline = e
		s.onClose(e.Close)
		// The caps stored at run time override capacity.orgs: read once
		// before serving, then every capacity.caps_refresh in the
		// background, so that no call waits on PostgreSQL for them.
		capStore := orgcap.New(pool)
		reloader, err := orgcap.NewReloader(capStore, slots, orgcap.ReloaderConfig{Every: a.Config.Capacity.CapsRefresh, Logger: a.Logger})
		if err != nil {
			return nil, fmt.Errorf("capacity.caps_refresh: %w", err)
		}
		// Stopped before the pipeline closes the pool (last added, first run).
		s.onClose(reloader.Start(ctx))
		mux.mount((&capsAdmin{store: capStore, token: token, tokens: store, logger: a.Logger}).handler(), capsAdminRoutes(), "/v1/admin/")
		replays.Set(e.Outbox)
		mux.handle("GET /metrics", requireAdmin(m.Handler(), adminCheck(token, opts.Authenticate)))
		recordings := ingest.NewHandler(ingest.Config{Pipeline: e.Jobs, Ledger: e.Ledger, Client: e.Client,
			Auth: store, Logger: a.Logger})
		mux.mount(recordings, ingest.Routes(), "/v1/recordings", "/v1/recordings/", "/v1/recordings:batch")
		ui, stopUI, err := newRiverUI(ctx, e.Client, a.Logger)
		if err != nil {
			return nil, err
		}
		s.onClose(stopUI)
		mux.mount(requireAdmin(ui, adminCheck(token, fromStore)), []route.Route{{Method: http.MethodGet, Path: RiverUIPrefix + "/", Subtree: true}},
			RiverUIPrefix+"/")
		// The status page at the root (the capacity API keeps the rest of "/").
		page, err := statusPage(a, statusSources{pool: pool, ledger: e.Ledger, jobs: e.Jobs, outbox: e.Outbox, leases: leases,
			windows: caps.Windows, slots: slots, dialer: dialer, timeline: timeline}, store, token, fromStore)
		if err != nil {
			return nil, err
		}
		mux.mount(page, status.Routes(), "GET /{$}", status.PathPrefix)
	}
	s.authenticated = opts.Token != "" || opts.Authenticate != nil
	if !s.authenticated && !config.Loopback(d.Addr) {
		return nil, fmt.Errorf("serve: refusing to listen on %s without authentication: set database_url (tokens from `callscribe tokens create`) or %s, or listen on a loopback address", d.Addr, config.EnvAPIToken)
	}
	mux.handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	}))
	mux.handle("GET /readyz", readyz(a.Logger, s.pipeline, rdb.Client()))
	mux.handle("GET "+OpenAPIPath, http.HandlerFunc(openAPI))
	mux.mount(httpapi.NewHandler(leases, slots, opts), httpapi.Routes(), "/")
	s.handler, s.routes = mux.mux, mux.routes
	return s, nil
}

// OpenAPIPath is where serve answers its OpenAPI document
// (docs/openapi.json), to anyone: it holds no secret.
const OpenAPIPath = "/openapi.json"

// openAPI answers the OpenAPI document, the embedded docs/openapi.json as
// it is.
func openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(docs.OpenAPI)
}

// routeTable is serve's mux and the operations mounted on it. Every
// surface is mounted through handle or mount, each with the route table
// of its own handler, so that Server.Routes lists every operation the mux
// serves (and the OpenAPI test holds that list against the document).
type routeTable struct {
	mux    *http.ServeMux
	routes []route.Route
}

// handle registers h at the pattern "METHOD PATH", the one operation h
// serves.
func (t *routeTable) handle(pattern string, h http.Handler) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || strings.ContainsAny(path, " {") {
		panic("serve: handle needs a pattern METHOD PATH without wildcards, not " + pattern)
	}
	t.mux.Handle(pattern, h)
	t.routes = append(t.routes, route.Route{Method: method, Path: path})
}

// mount registers h at each of patterns, h serving routes (its own route
// table).
func (t *routeTable) mount(h http.Handler, routes []route.Route, patterns ...string) {
	for _, p := range patterns {
		t.mux.Handle(p, h)
	}
	t.routes = append(t.routes, routes...)
}

// openTokenCache opens the cache of store's tokens on a pool of its own
// (auth.CachePoolMaxConns connections, each dialled within
// tokens.lookup_timeout), both closed by Close.
func (s *Server) openTokenCache(ctx context.Context, store *auth.Store) (*auth.Cache, error) {
	a := s.deps.App
	cfg := a.Config.Tokens
	cfg.Logger = a.Logger
	cfg = cfg.WithDefaults()
	// No logger: the workers' pool has warned already when the runtime
	// role cannot be taken.
	pool, err := app.ConnectTokenCache(ctx, a.Config.DatabaseURL, nil, auth.CachePoolMaxConns, cfg.LookupTimeout)
	if err != nil {
		return nil, fmt.Errorf("token cache: %w", err)
	}
	cache, err := auth.NewCache(ctx, store, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.onClose(pool.Close)
	s.onClose(cache.Close)
	return cache, nil
}

// onClose adds f to what Close runs (last added, first run).
func (s *Server) onClose(f func()) { s.closers = append(s.closers, f) }

// Close closes what New opened, in reverse order. Run calls it; call it
// yourself only for a Server you do not Run.
func (s *Server) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// Handler is every surface of the server on one mux, for tests and for
// mounting behind another server.
func (s *Server) Handler() http.Handler { return s.handler }

// Routes lists every operation Handler serves, from the route tables of
// the handlers mounted on it (without database_url: the capacity API,
// /healthz, /readyz and /openapi.json). docs/openapi.json documents each.
func (s *Server) Routes() []route.Route { return slices.Clone(s.routes) }

// Run starts the pipeline's workers (with Deps.Workers and a database),
// listens on Deps.Addr, prints the bound address on the App's stdout and
// serves until ctx ends; then it stops accepting requests, lets those in
// flight finish (up to ShutdownGrace), stops the workers within
// pipeline.shutdown_grace and closes everything New opened.
func (s *Server) Run(ctx context.Context) error {
	defer s.Close()
	a, e := s.deps.App, s.pipeline
	workers := false
	if s.deps.Workers && e != nil {
		// River's own context must outlive the signal: stopping is ours.
		if err := e.Client.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("starting workers: %w", err)
		}
		workers = true
	}
	err := s.serveHTTP(ctx)
	if workers {
		cfg := e.Jobs.Config()
		a.Logger.Info("stopping the workers: no new work is fetched; running steps get the shutdown grace", slog.Duration("grace", cfg.ShutdownGrace))
		if serr := e.Jobs.Stop(context.WithoutCancel(ctx), e.Client); serr != nil && err == nil {
			err = serr
		}
	}
	return err
}

// readyz answers 200 when PostgreSQL (with database_url) answers and is
// migrated, 503 otherwise; Redis down is reported as degraded, not
// unready, because capacity fails open.
func readyz(logger *slog.Logger, e *app.Pipeline, rdb redis.UniversalClient) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		out := map[string]string{"postgres": "not configured", "redis": "ok"}
		ready := true
		if e != nil {
			out["postgres"] = "ok"
			pending, err := migrations.New(e.Pool, nil).Pending(ctx)
			switch {
			case err != nil:
				logger.Warn("readyz: PostgreSQL", slog.String("error", err.Error()))
				ready, out["postgres"] = false, "unreachable"
			case pending > 0:
				ready, out["postgres"] = false, fmt.Sprintf("%d migrations pending: run callscribe migrate up", pending)
			}
		}
		if err := rdb.Ping(ctx).Err(); err != nil {
			logger.Warn("readyz: Redis", slog.String("error", err.Error()))
			out["redis"] = "degraded: unreachable (capacity fails open)"
		}
		status := http.StatusOK
		out["status"] = "ready"
		if !ready {
			status, out["status"] = http.StatusServiceUnavailable, "unready"
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(out)
	}
}

// serveHTTP listens on the address, prints the bound address and serves
// the handler until ctx ends, then shuts down gracefully: shuttingDown is
// closed as the shutdown begins, so that requests waiting on it answer at
// once.
func (s *Server) serveHTTP(ctx context.Context) error {
	a, addr := s.deps.App, s.deps.Addr
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// A slot acquire may wait up to SlotWaitMax before answering.
		WriteTimeout: httpapi.SlotWaitMax + 10*time.Second,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(a.Logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(func() { close(s.shuttingDown) })
	bound := ln.Addr().String()
	fmt.Fprintf(a.Env.Stdout, "callscribe serve listening on http://%s\n", bound)
	a.Logger.Info("serve listening", slog.String("addr", bound), slog.Bool("token_required", s.authenticated))

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", bound, err)
	case <-ctx.Done():
	}
	a.Logger.Info("serve shutting down: no new requests; those in flight finish", slog.String("addr", bound))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutting down %s: %w", bound, err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving on %s: %w", bound, err)
	}
	return nil
}
