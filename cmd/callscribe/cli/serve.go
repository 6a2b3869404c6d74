package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/ingest"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/status"
	"github.com/callscribe/callscribe/migrations"
)

// Defaults of `callscribe serve`.
const (
	ServeAddrDefault = "127.0.0.1:8081"
	// serveShutdownGrace is how long in-flight requests get after Ctrl-C.
	serveShutdownGrace = 10 * time.Second
)

func (a *commands) serveCommand() *cobra.Command {
	var addr string
	var noWorkers bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve callscribe over HTTP: the recordings API and the pipeline's workers (with database_url), and the capacity API",
		Long: `serve runs, in one process:

- with database_url set: the recordings API (package ingestapi) and the
  pipeline's workers (--no-workers: the API alone), authenticated by the
  tokens of ` + "`callscribe tokens create`" + `:

  POST /v1/recordings            {call_id, audio, lane, deadline, ...}: 201 new, 200 existing
  POST /v1/recordings:batch      {items: [...]}: each item's status, good ones kept
  GET  /v1/recordings/{call_id}  the call's recordings with their events
  GET  /v1/recordings?state=&lane=&cursor=&limit=
  POST /v1/recordings/{id}:retry (admin token)

- the capacity API (package capacity/httpapi), counting in the Redis of
  redis_url with the limits of capacity.limits and the call slots of
  capacity.orgs (by default 10 calls per organisation, 5 per campaign):

  POST /v1/leases, /v1/leases/refresh, /v1/leases/release
  POST /v1/slots, /v1/slots/bind, /v1/slots/release
  POST /v1/calls/{call_id}/release, /v1/calls/{call_id}/transcriber
  POST /v1/calls:start (capacity.start_rate: per campaign, default 1/s)
  POST /v1/gate/enter, /v1/gate/leave (capacity.gate; this process's gate)
  GET  /v1/status
  POST /v1/caller-ids:acquire, /v1/caller-ids:release; GET /v1/caller-ids?org=

- the status page at / (admin token: a bearer header, or signed in once
  from the browser for a session cookie): recordings, cooldowns, capacity
  with per-minute peaks, outbox backlog and recent warnings.

- River UI at /riverui/ (admin token: a bearer header, or the password of
  the browser's login prompt), and Prometheus metrics at /metrics (admin
  token: scrape with it as a bearer token).

- GET /healthz (the process is up) and GET /readyz (PostgreSQL reachable
  and migrated: 200, else 503; Redis down is "degraded", still 200,
  because capacity fails open).

A tenant's token acts for that tenant (its organisation in the capacity
API) only: another's recordings, slots and calls are 404. ` + config.EnvAPIToken + `, when
set, is accepted by the capacity API as an admin token. Without any
authentication serve listens on a loopback address only. A client of the
capacity API refreshes its own leases (/v1/leases/refresh), so the leases
of a client that dies lapse on their own. The bound address is printed on
stdout. Ctrl-C stops accepting requests, lets those in flight finish (up
to 10s), then stops the workers within pipeline.shutdown_grace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			leases, rdb, err := a.OpenLeases()
			if err != nil {
				return err
			}
			defer func() { _ = rdb.Close() }()
			stopAlerts, err := a.StartAlertWebhook()
			if err != nil {
				return err
			}
			defer stopAlerts()
			// Closed when the HTTP server begins to shut down: waiting
			// requests (dial long-polls, slot waits) answer at once.
			shuttingDown := make(chan struct{})
			orgs := make(map[string]capacity.OrgSlots, len(a.Config.Capacity.Orgs))
			for name, o := range a.Config.Capacity.Orgs {
				orgs[name] = capacity.OrgSlots{Limit: o.Limit, Campaigns: o.Campaigns}
			}
			slots, err := capacity.NewSlots(rdb, capacity.SlotsConfig{OrgLimit: a.Config.Capacity.OrgLimit, Orgs: orgs, Logger: a.Logger})
			if err != nil {
				return fmt.Errorf("capacity.orgs: %w", err)
			}
			token := a.Env.Getenv(config.EnvAPIToken)
			agents := map[string]live.CallProviders{}
			for name, ag := range a.Config.Capacity.Agents {
				agents[name] = live.CallProviders{STT: ag.STT, TTS: ag.TTS}
			}
			// Call timelines and the dial queue live in Redis, shared by
			// every serve process; each runs a re-checker of the queue.
			timeline, err := live.NewTimeline(rdb, live.TimelineConfig{Logger: a.Logger})
			if err != nil {
				return fmt.Errorf("call timelines: %w", err)
			}
			dialer, err := live.NewDialer(leases, rdb, live.DialerConfig{Timeline: timeline, DetachLeases: true, Logger: a.Logger})
			if err != nil {
				return fmt.Errorf("dial queue: %w", err)
			}
			dialCtx, stopDialer := context.WithCancel(context.WithoutCancel(ctx))
			dialerDone := make(chan struct{})
			go func() { defer close(dialerDone); dialer.Run(dialCtx, nil) }()
			defer func() { stopDialer(); <-dialerDone }()
			starts, err := live.NewRateLimiter(rdb, a.Config.Capacity.RateLimiterConfig())
			if err != nil {
				return fmt.Errorf("capacity.start_rate: %w", err)
			}
			callerIDs, err := capacity.NewCallerIDs(rdb, capacity.CallerIDsConfig{Logger: a.Logger})
			if err != nil {
				return err
			}
			opts := httpapi.Options{Logger: a.Logger, Token: token, Agents: agents, Dialer: dialer, Timeline: timeline,
				Starts: starts, GateTicketTTL: a.Config.Capacity.Gate.TicketTTL, CallerIDs: callerIDs,
				OrgLeaseShare: a.Config.Capacity.OrgLeaseShare, MaxDialWaiters: a.Config.Capacity.MaxDialWaiters,
				Shutdown: shuttingDown}
			if a.Config.Capacity.Gate.Size > 0 {
				// This process's gate: its tickets live here, not in Redis.
				if opts.Gate, err = live.NewGate(a.Config.Capacity.GateConfig()); err != nil {
					return fmt.Errorf("capacity.gate: %w", err)
				}
			}
			mux := http.NewServeMux()
			var (
				e       *app.Pipeline
				workers bool
			)
			if a.Config.DatabaseURL != "" {
				caps, stop, err := a.CapsFrom(ctx, leases, rdb)
				if err != nil {
					return err
				}
				defer stop()
				pool, err := app.ConnectWorkers(ctx, a.Config.DatabaseURL, a.Logger, a.PoolSize())
				if err != nil {
					return err
				}
				// One token store for every API of this process, so that
				// its refusals are counted in one place.
				store := auth.New(pool)
				opts.Authenticate = storeAuthenticator(store)
				// This process's metrics: its workers' counters, and the
				// global gauges read from the database and Redis.
				replays := new(lateOutbox)
				m := a.newMetrics(metricsSources{pool: pool, leases: leases, slots: slots, windows: caps.Windows, tokens: store, replays: replays})
				caps.Metrics = m
				if e, err = a.PipelineOn(ctx, pool, caps); err != nil {
					pool.Close()
					return err
				}
				defer e.Close()
				replays.set(e.Outbox)
				mux.Handle("GET /metrics", requireAdmin(m.Handler(), adminCheck(token, opts.Authenticate)))
				ingest := ingest.NewHandler(ingest.Config{Pipeline: e.Jobs, Ledger: e.Ledger, Client: e.Client,
					Auth: store, Logger: a.Logger})
				for _, p := range []string{"/v1/recordings", "/v1/recordings/", "/v1/recordings:batch"} {
					mux.Handle(p, ingest)
				}
				ui, stopUI, err := newRiverUI(ctx, e.Client, a.Logger)
				if err != nil {
					return err
				}
				defer stopUI()
				mux.Handle(RiverUIPrefix+"/", requireAdmin(ui, adminCheck(token, opts.Authenticate)))
				// The status page at the root (the capacity API keeps the rest of "/").
				page, err := a.statusPage(statusSources{pool: pool, ledger: e.Ledger, outbox: e.Outbox, leases: leases,
					windows: caps.Windows, slots: slots, dialer: dialer, timeline: timeline}, store, token, opts.Authenticate)
				if err != nil {
					return err
				}
				mux.Handle("GET /{$}", page)
				mux.Handle(status.PathPrefix, page)
				if !noWorkers {
					// River's own context must outlive the signal: stopping is ours.
					if err := e.Client.Start(context.WithoutCancel(ctx)); err != nil {
						return fmt.Errorf("starting workers: %w", err)
					}
					workers = true
				}
			}
			auth := opts.Token != "" || opts.Authenticate != nil
			if !auth && !config.Loopback(addr) {
				return fmt.Errorf("serve: refusing to listen on %s without authentication: set database_url (tokens from `callscribe tokens create`) or %s, or listen on a loopback address", addr, config.EnvAPIToken)
			}
			mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, _ = io.WriteString(w, "ok\n")
			})
			mux.HandleFunc("GET /readyz", a.readyz(e, rdb))
			mux.Handle("/", httpapi.NewHandler(leases, slots, opts))
			err = a.serveHTTP(ctx, addr, mux, auth, shuttingDown)
			if workers {
				cfg := e.Jobs.Config()
				a.Logger.Info("stopping the workers: no new work is fetched; running steps get the shutdown grace", slog.Duration("grace", cfg.ShutdownGrace))
				if serr := e.Jobs.Stop(context.WithoutCancel(ctx), e.Client); serr != nil && err == nil {
					err = serr
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "addr", ServeAddrDefault, "host:port to listen on (port 0: any free port)")
	cmd.Flags().BoolVar(&noWorkers, "no-workers", false, "serve the APIs without running the pipeline's workers")
	return cmd
}

// readyz answers 200 when PostgreSQL (with database_url) answers and is
// migrated, 503 otherwise; Redis down is reported as degraded, not
// unready, because capacity fails open.
func (a *commands) readyz(e *app.Pipeline, rdb *redis.Client) http.HandlerFunc {
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
				a.Logger.Warn("readyz: PostgreSQL", slog.String("error", err.Error()))
				ready, out["postgres"] = false, "unreachable"
			case pending > 0:
				ready, out["postgres"] = false, fmt.Sprintf("%d migrations pending: run callscribe migrate up", pending)
			}
		}
		if err := rdb.Ping(ctx).Err(); err != nil {
			a.Logger.Warn("readyz: Redis", slog.String("error", err.Error()))
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

// serveHTTP listens on addr, prints the bound address and serves handler
// until ctx ends, then shuts down gracefully: shuttingDown is closed as
// the shutdown begins, so that requests waiting on it answer at once.
func (a *commands) serveHTTP(ctx context.Context, addr string, handler http.Handler, auth bool, shuttingDown chan struct{}) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// A slot acquire may wait up to SlotWaitMax before answering.
		WriteTimeout: httpapi.SlotWaitMax + 10*time.Second,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(a.Logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(func() { close(shuttingDown) })
	bound := ln.Addr().String()
	fmt.Fprintf(a.Env.Stdout, "callscribe serve listening on http://%s\n", bound)
	a.Logger.Info("serve listening", slog.String("addr", bound), slog.Bool("token_required", auth))

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", bound, err)
	case <-ctx.Done():
	}
	a.Logger.Info("serve shutting down: no new requests; those in flight finish", slog.String("addr", bound))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serveShutdownGrace)
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
