package crmsim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	cfg    Config
	log    *slog.Logger
	tokens simserver.Credentials
	simserver.Surface

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
	s.Surface = simserver.NewSurface(mux, s.log, "crmsim")
	return s, nil
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
