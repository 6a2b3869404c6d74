package crmsim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/crm"

	"github.com/callscribe/callscribe/internal/simserver"
)

// Server is a simulated CRM that speaks crm-webhook/v1. It keeps
// everything in memory. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	tokens  simserver.Credentials
	handler http.Handler

	rng *simserver.Rand

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
		rng:           simserver.NewLockedRand(cfg.Rand),
		byKey:         map[string]*record{},
		cooldownUntil: map[string]time.Time{},
		st:            Stats{ApplyCount: map[string]int{}, Bodies: map[string]json.RawMessage{}},
	}
	s.tokens = simserver.NewCredentials(cfg.Tokens)
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
	return simserver.ListenAndServe(ctx, addr, s.handler, s.log, "crmsim")
}

// Serve serves HTTP on ln until ctx is done, then shuts down gracefully:
// it stops accepting, lets in-flight requests finish for up to 5 seconds
// (simserver.ShutdownGrace), then cancels them and closes the remaining
// connections. It returns nil after a shutdown, or the error that stopped
// serving earlier. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return simserver.Serve(ctx, ln, s.handler, s.log, "crmsim")
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

// write writes rep, or drops the connection. Every answer carries a Date
// from Config.Clock, not the one net/http would add from the real clock,
// so that its Date and its Retry-After dates come from one clock.
func (s *Server) write(w http.ResponseWriter, rep reply) {
	if rep.drop {
		simserver.HangUp(w)
		return
	}
	w.Header().Set("Date", s.now().Format(http.TimeFormat))
	body, err := json.Marshal(rep.body)
	if err != nil {
		rep = errorReply(http.StatusInternalServerError, errServerError, "encoding the answer: %v", err)
		body, _ = json.Marshal(rep.body)
	}
	simserver.Write(w, simserver.Answer{
		Status:      rep.status,
		ContentType: contentType,
		RetryAfter:  rep.retryAfter,
		Header:      rep.header,
		Body:        body,
	})
}

// delay waits Config.Latency, or until ctx is done; it reports whether the
// wait ran its course.
func (s *Server) delay(ctx context.Context) bool { return clock.Sleep(ctx, s.cfg.Latency) }

// authenticate returns the Bearer token of r if it is one of
// Config.Tokens.
func (s *Server) authenticate(r *http.Request) (string, bool) { return s.tokens.Authenticate(r) }

// now is the Clock's now in UTC.
func (s *Server) now() time.Time { return s.cfg.Clock.Now().UTC() }
