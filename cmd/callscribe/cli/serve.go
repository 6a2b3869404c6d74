package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve"
)

// serveOptions are the flags of `callscribe serve`.
type serveOptions struct {
	addr      string
	noWorkers bool
}

// Validate refuses an empty address.
func (o serveOptions) Validate() error {
	if o.addr == "" {
		return errors.New("--addr: want host:port")
	}
	return nil
}

func (a *commands) serveCommand() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve callscribe over HTTP: the recordings API and the pipeline's workers (with database_url), and the capacity API",
		Long: `serve runs, in one process:

- with database_url set: the recordings API (package serve/ingest) and the
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
  POST /v1/calls:start (capacity.start_rate: per campaign, default 1/s;
       per organisation when org_default or orgs is set, default none)
  POST /v1/gate/enter, /v1/gate/leave (capacity.gate; shared in Redis by every serve process)
  GET  /v1/status
  POST /v1/providers/{provider}/{kind}/refusals (the vendor refused a
       stream below the limit: lower it to in_use - 1 and alert)
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

- GET /openapi.json (no token): the OpenAPI 3.1 document of every route
  above, docs/openapi.json as embedded in the binary.

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
			if err := o.Validate(); err != nil {
				return err
			}
			s, err := serve.New(cmd.Context(), serve.Deps{App: a.App, Addr: o.addr, Workers: !o.noWorkers})
			if err != nil {
				return err
			}
			return s.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.addr, "addr", serve.AddrDefault, "host:port to listen on (port 0: any free port)")
	cmd.Flags().BoolVar(&o.noWorkers, "no-workers", false, "serve the APIs without running the pipeline's workers")
	return cmd
}
