package sttsim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/simserver"
)

// Server is a simulated stt-http/v1 speech-to-text server. It keeps
// everything in memory. Its methods are safe for concurrent use.
type Server struct {
	cfg    Config
	log    *slog.Logger
	keys   simserver.Credentials
	models map[string]bool
	simserver.Surface

	rng *simserver.Rand

	mu            sync.Mutex
	byID          map[string]*transcription
	byKey         map[string]*transcription
	batches       map[string]*batch
	batchByKey    map[string]*batch
	cooldownOf    map[Scope]int         // index in st.Cooldowns of the scope's latest cooldown
	handling      map[Scope]int         // submissions being handled that hold a slot (see enter)
	pending       map[Scope][]time.Time // ready times of the asynchronous work answered 202
	formTurn      int                   // next form of the FormMixed rotation
	troubleTurn   map[string]uint64     // per key, submissions that reached the trouble knobs (Config.TroubleSeed)
	malformedTurn int                   // next of malformedValues
	st            Stats
}

// New returns a Server for cfg after defaults (see Config.WithDefaults),
// or an error naming the first Config field that is out of range.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger,
		rng:        simserver.NewLockedRand(cfg.Rand),
		byID:       map[string]*transcription{},
		byKey:      map[string]*transcription{},
		batches:    map[string]*batch{},
		batchByKey: map[string]*batch{},
		cooldownOf: map[Scope]int{},
		handling:   map[Scope]int{},
		pending:    map[Scope][]time.Time{},
		st: Stats{
			SubmissionsByScope: map[Scope]int{},
			Transcriptions:     map[string]int{},
			MaxInFlightSeen:    map[Scope]int{},
		},
	}
	s.keys = simserver.NewCredentials(cfg.APIKeys)
	if len(cfg.Models) > 0 {
		s.models = map[string]bool{}
		for _, m := range cfg.Models {
			s.models[m] = true
		}
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/transcriptions", s.routeSubmission(s.readSubmit))
	mux.Handle("GET /v1/transcriptions", s.route(s.handleReconcile))
	mux.Handle("GET /v1/transcriptions/{id}", s.route(s.handlePoll))
	if !cfg.NoBatches {
		mux.Handle("POST /v1/batches", s.routeSubmission(s.readBatchSubmit))
		mux.Handle("GET /v1/batches/{id}", s.route(s.handleBatchPoll))
	}
	mux.Handle("/", s.route(s.handleUnrouted))
	s.Surface = simserver.NewSurface(mux, s.log, "sttsim")
	return s, nil
}

// reply is a handler's answer, written by write.
type reply struct {
	status     int
	body       any
	retryAfter string      // the Retry-After value; "" for none
	header     http.Header // further headers
	drop       bool        // reset the connection instead of answering
	abandoned  bool        // the client went away: write nothing
	// pendingUntil is when the asynchronous work this answer accepted
	// (a new 202 transcription, a new batch) is ready: it stays in flight
	// until then. Zero for anything else.
	pendingUntil time.Time
}

func errorReply(status int, typ, format string, args ...any) reply {
	return reply{status: status, body: errorBody{Error: apiError{Type: typ, Message: fmt.Sprintf(format, args...)}}}
}

// route wraps a handler with what every request but a submission gets:
// latency, then authentication, then the answer. Submissions go through
// routeSubmission.
func (s *Server) route(h func(r *http.Request, apiKey string) reply) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.delay(r.Context()) {
			s.cancelled()
			return
		}
		var rep reply
		if key, ok := s.authenticate(r); ok {
			rep = h(r, key)
		} else {
			rep = unauthorized()
		}
		s.respond(w, r, rep)
	})
}

func unauthorized() reply {
	rep := errorReply(http.StatusUnauthorized, errUnauthorized, "missing or unknown API key: send Authorization: Bearer <key>")
	rep.header = http.Header{"Www-Authenticate": {`Bearer realm="stt-http"`}}
	return rep
}

// respond logs and writes rep, or counts a client that went away.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, rep reply) {
	if rep.abandoned {
		s.cancelled()
		return
	}
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "sttsim: answered",
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", rep.status), slog.Bool("dropped", rep.drop))
	s.write(w, rep)
}

// delay waits Config.Latency plus jitter, or until ctx is done; it reports
// whether the wait ran its course.
func (s *Server) delay(ctx context.Context) bool {
	d := s.cfg.Latency
	if j := s.cfg.LatencyJitter; j > 0 {
		d += time.Duration(s.rng.Int64N(int64(j)))
	}
	return clock.Sleep(ctx, d)
}

func (s *Server) cancelled() {
	s.mu.Lock()
	s.st.Cancelled++
	s.mu.Unlock()
}

// authenticate returns the Bearer key of r if it is one of Config.APIKeys.
func (s *Server) authenticate(r *http.Request) (string, bool) { return s.keys.Authenticate(r) }

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

// now is the Clock's now in UTC.
func (s *Server) now() time.Time { return s.cfg.Clock.Now().UTC() }

// handleUnrouted answers a path that is not in the protocol with 404, or a
// path that is with the wrong method with 405.
func (s *Server) handleUnrouted(r *http.Request, _ string) reply {
	allow := ""
	segs := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case len(segs) == 2 && segs[0] == "v1" && segs[1] == "transcriptions":
		allow = "GET, POST"
	case len(segs) >= 2 && segs[1] == "batches" && s.cfg.NoBatches:
		// no batches here: 404, as stt-http/v1 says
	case len(segs) == 2 && segs[0] == "v1" && segs[1] == "batches":
		allow = "POST"
	case len(segs) == 3 && segs[0] == "v1" && (segs[1] == "transcriptions" || segs[1] == "batches") && segs[2] != "":
		allow = "GET"
	}
	if allow == "" {
		return errorReply(http.StatusNotFound, errNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path)
	}
	rep := errorReply(http.StatusMethodNotAllowed, errInvalidRequest, "%s is not allowed on %s", r.Method, r.URL.Path)
	rep.header = http.Header{"Allow": {allow}}
	return rep
}
