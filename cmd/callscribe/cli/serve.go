package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/live"
)

// Defaults of `callscribe serve`.
const (
	ServeAddrDefault = "127.0.0.1:8081"
	// EnvAPIToken, when set, is the bearer token every request to
	// `callscribe serve` must carry. Unset: no authentication.
	EnvAPIToken = "CALLSCRIBE_API_TOKEN"
	// serveShutdownGrace is how long in-flight requests get after Ctrl-C.
	serveShutdownGrace = 10 * time.Second
)

func (a *app) serveCommand() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the capacity HTTP API: vendor leases and call slots for live-call runtimes in any language",
		Long: `serve answers the JSON HTTP API of package capacity (see httpapi.NewHandler)
on --addr, counting in the Redis of redis_url with the limits of
capacity.limits, and call slots with the caps of capacity.orgs (by default
10 calls per organisation, 5 per campaign):

  POST /v1/leases                {provider, kind, holder, lane}
  POST /v1/leases/refresh        {leases: [lease...]}
  POST /v1/leases/release        {lease}
  POST /v1/slots                 {org, campaign, timeout_ms, retry_ms}
  POST /v1/slots/bind            {slot, call_id}
  POST /v1/slots/release         {slot}
  POST /v1/calls/{call_id}/release
  GET  /v1/status

serve runs no heartbeat: a client refreshes the leases it holds itself
through /v1/leases/refresh (every capacity.heartbeat_every, well within
capacity.lease_stt and lease_tts), so the leases of a client that dies
lapse on their own. With database_url set, every request needs
"Authorization: Bearer TOKEN", a token of ` + "`callscribe tokens create`" + `: a
tenant's token acts for that organisation only (another's slots and calls
are 404), an admin token for all. ` + EnvAPIToken + `, when set, is accepted as an
admin token. Without either, serve listens on a loopback address only.
The bound address is printed on stdout. Ctrl-C stops accepting requests
and lets those in flight finish (up to 10s).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			leases, rdb, err := a.openLeases()
			if err != nil {
				return err
			}
			defer func() { _ = rdb.Close() }()
			orgs := make(map[string]capacity.OrgSlots, len(a.config.Capacity.Orgs))
			for name, o := range a.config.Capacity.Orgs {
				orgs[name] = capacity.OrgSlots{Limit: o.Limit, Campaigns: o.Campaigns}
			}
			slots, err := capacity.NewSlots(rdb, capacity.SlotsConfig{Orgs: orgs, Logger: a.logger})
			if err != nil {
				return fmt.Errorf("capacity.orgs: %w", err)
			}
			token := a.env.Getenv(EnvAPIToken)
			agents := map[string]live.CallProviders{}
			for name, ag := range a.config.Capacity.Agents {
				agents[name] = live.CallProviders{STT: ag.STT, TTS: ag.TTS}
			}
			opts := httpapi.Options{Logger: a.logger, Token: token, Agents: agents}
			if a.config.DatabaseURL != "" {
				// The tokens of `callscribe tokens create`: each acts for
				// its tenant's organisation only, or as an admin.
				pool, err := connect(cmd.Context(), a.config.DatabaseURL, a.logger)
				if err != nil {
					return err
				}
				defer pool.Close()
				opts.Authenticate = serveAuthenticator(pool)
			}
			auth := opts.Token != "" || opts.Authenticate != nil
			if !auth && !loopbackAddr(addr) {
				return fmt.Errorf("serve: refusing to listen on %s without authentication: set database_url (tokens from `callscribe tokens create`) or %s, or listen on a loopback address", addr, EnvAPIToken)
			}
			handler := httpapi.NewHandler(leases, slots, opts)
			return a.serveHTTP(cmd.Context(), addr, handler, auth)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", ServeAddrDefault, "host:port to listen on (port 0: any free port)")
	return cmd
}

// serveHTTP listens on addr, prints the bound address and serves handler
// until ctx ends, then shuts down gracefully.
func (a *app) serveHTTP(ctx context.Context, addr string, handler http.Handler, auth bool) error {
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
		ErrorLog:     slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn),
	}
	bound := ln.Addr().String()
	fmt.Fprintf(a.env.Stdout, "capacity API listening on http://%s\n", bound)
	a.logger.Info("capacity API listening", slog.String("addr", bound), slog.Bool("token_required", auth))

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", bound, err)
	case <-ctx.Done():
	}
	a.logger.Info("capacity API shutting down", slog.String("addr", bound))
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

// loopbackAddr reports whether addr (host:port) names a loopback host.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
