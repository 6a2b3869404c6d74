package simserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ShutdownGrace is how long Serve lets in-flight requests finish after its
// context is done, before it cancels them and closes every connection.
const ShutdownGrace = 5 * time.Second

// ListenAndServe listens on the TCP address addr and serves h until ctx is
// done; see Serve. name prefixes its errors ("sttsim").
func ListenAndServe(ctx context.Context, addr string, h http.Handler, log *slog.Logger, name string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.WithoutCancel(ctx), "tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: listening on %s: %w", name, addr, err)
	}
	return Serve(ctx, ln, h, log, name)
}

// Serve serves h on ln until ctx is done, then shuts down gracefully: it
// stops accepting, lets in-flight requests finish for up to ShutdownGrace,
// then cancels them and closes the remaining connections. It returns nil
// after a shutdown, or the error that stopped serving earlier, prefixed
// with name. It closes ln. The server's own errors go to log at debug
// level.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, name string) error {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("%s: serving: %w", name, err)
	case <-ctx.Done():
	}
	grace, stop := context.WithTimeout(context.Background(), ShutdownGrace)
	defer stop()
	if err := srv.Shutdown(grace); err != nil {
		cancel()
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: serving: %w", name, err)
	}
	return nil
}

// Surface is a simulator's HTTP surface: its handler, served by the
// methods below. A simulator's Server embeds it, so that each offers the
// same Handler, ListenAndServe and Serve.
type Surface struct {
	handler http.Handler
	log     *slog.Logger
	name    string
}

// NewSurface returns the surface of the simulator name ("sttsim") that
// serves h and logs its server's errors to log.
func NewSurface(h http.Handler, log *slog.Logger, name string) Surface {
	return Surface{handler: h, log: log, name: name}
}

// Handler returns the simulator's HTTP handler, for httptest.NewServer or
// a server of the caller's. Dropping a connection needs a ResponseWriter
// that can be hijacked (HTTP/1.x); otherwise the handler panics with
// http.ErrAbortHandler, which net/http turns into an aborted response.
func (s Surface) Handler() http.Handler { return s.handler }

// ListenAndServe listens on the TCP address addr and serves until ctx is
// done; see Serve.
func (s Surface) ListenAndServe(ctx context.Context, addr string) error {
	return ListenAndServe(ctx, addr, s.handler, s.log, s.name)
}

// Serve serves HTTP on ln until ctx is done, then shuts down gracefully:
// it stops accepting, lets in-flight requests finish for up to
// ShutdownGrace, then cancels them and closes the remaining connections.
// It returns nil after a shutdown, or the error that stopped serving
// earlier. It closes ln.
func (s Surface) Serve(ctx context.Context, ln net.Listener) error {
	return Serve(ctx, ln, s.handler, s.log, s.name)
}
