package crmsim

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/callscribe/callscribe/crm"
)

// shutdownGrace is how long Serve lets in-flight requests finish after its
// context is done, before it cancels them and closes every connection.
const shutdownGrace = 5 * time.Second

// Server is a simulated CRM that speaks crm-webhook/v1. It keeps
// everything in memory. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	tokens  [][]byte
	handler http.Handler

	randMu sync.Mutex
	rng    *rand.Rand

	mu            sync.Mutex
	byKey         map[string]*record
	order         []*record            // in apply order
	cooldownUntil map[string]time.Time // by token
	malformedTurn int
	st            Stats
}

// record is one applied action set.
type record struct {
	key       string
	id        string
	appliedAt time.Time
	canonical []byte
	body      []byte // as first received
	set       crm.ActionSet
}

// New returns a Server for cfg after defaults (see Config.WithDefaults),
// or an error naming the first Config field that is out of range.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:           cfg,
		log:           cfg.Logger,
		rng:           cfg.Rand,
		byKey:         map[string]*record{},
		cooldownUntil: map[string]time.Time{},
		st:            Stats{ApplyCount: map[string]int{}, Bodies: map[string]json.RawMessage{}},
	}
	for _, t := range cfg.Tokens {
		s.tokens = append(s.tokens, []byte(t))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/action-sets", s.serveDeliver)
	mux.HandleFunc("/v1/action-sets", func(w http.ResponseWriter, r *http.Request) {
		rep := errorReply(http.StatusMethodNotAllowed, errMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path)
		rep.header = http.Header{"Allow": {http.MethodPost}}
		s.write(w, rep)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.write(w, errorReply(http.StatusNotFound, errNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	s.handler = mux
	return s, nil
}

// Handler returns the server's HTTP handler, for httptest.NewServer or a
// server of the caller's. Dropping a connection needs a ResponseWriter
// that can be hijacked (HTTP/1.x); otherwise the handler panics with
// http.ErrAbortHandler, which net/http turns into an aborted response.
func (s *Server) Handler() http.Handler { return s.handler }

// ListenAndServe listens on the TCP address addr and serves until ctx is
// done; see Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.WithoutCancel(ctx), "tcp", addr)
	if err != nil {
		return fmt.Errorf("crmsim: listening on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves HTTP on ln until ctx is done, then shuts down gracefully:
// it stops accepting, lets in-flight requests finish for up to 5 seconds,
// then cancels them and closes the remaining connections. It returns nil
// after a shutdown, or the error that stopped serving earlier. It closes
// ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("crmsim: serving: %w", err)
	case <-ctx.Done():
	}
	grace, stop := context.WithTimeout(context.Background(), shutdownGrace)
	defer stop()
	if err := srv.Shutdown(grace); err != nil {
		cancel()
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("crmsim: serving: %w", err)
	}
	return nil
}

// reply is a handler's answer, written by write.
type reply struct {
	status     int
	body       any
	retryAfter string      // the Retry-After value; "" for none
	header     http.Header // further headers
	drop       bool        // reset the connection instead of answering
}

func errorReply(status int, typ, format string, args ...any) reply {
	return reply{status: status, body: errorBody{Error: apiError{Type: typ, Message: fmt.Sprintf(format, args...)}}}
}

// write writes rep, or drops the connection.
func (s *Server) write(w http.ResponseWriter, rep reply) {
	if rep.drop {
		hangUp(w)
		return
	}
	body, err := json.Marshal(rep.body)
	if err != nil {
		rep = errorReply(http.StatusInternalServerError, errServerError, "encoding the answer: %v", err)
		body, _ = json.Marshal(rep.body)
	}
	h := w.Header()
	for k, v := range rep.header {
		h[k] = v
	}
	h.Set("Content-Type", contentType)
	if rep.retryAfter != "" {
		h.Set("Retry-After", rep.retryAfter)
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(append(body, '\n'))
}

// hangUp closes the connection under w without answering, with a TCP reset
// where it can, so that the client sees "connection reset by peer".
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	raw := conn
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok { // TLS
		raw = nc.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// delay waits Config.Latency, or until ctx is done; it reports whether the
// wait ran its course.
func (s *Server) delay(ctx context.Context) bool {
	if s.cfg.Latency <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(s.cfg.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// authenticate returns the Bearer token of r if it is one of
// Config.Tokens.
func (s *Server) authenticate(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	found := false
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(token), t) == 1 {
			found = true
		}
	}
	return token, found && token != ""
}

// chance draws whether something of probability p happens. It draws nothing
// when p is 0 or 1.
func (s *Server) chance(p float64) bool {
	switch {
	case p <= 0:
		return false
	case p >= 1:
		return true
	}
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rng.Float64() < p
}

// pick draws one of n choices.
func (s *Server) pick(n int) int {
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rng.IntN(n)
}

// now is the Clock's now in UTC.
func (s *Server) now() time.Time { return s.cfg.Clock.Now().UTC() }
