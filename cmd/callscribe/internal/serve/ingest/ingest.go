// Package ingest is the recordings API of `callscribe serve`: platforms
// feed recordings and read their state over HTTP with a tenant's token.
//
//	POST /v1/recordings               {call_id, audio, lane, deadline, model, language, started_at} → 201 new | 200 existing
//	POST /v1/recordings:batch         {items: [...]} (at most MaxBatch)       → 200 {results: [{index, status, recording | error}]}
//	GET  /v1/recordings/{call_id}                                             → 200 {recordings: [{..., events}]} | 404
//	GET  /v1/recordings?state=&lane=&cursor=&limit=                           → 200 {recordings, next_cursor}
//	POST /v1/recordings/{id}:retry    (admin)                                 → 200 {recording} | 404 | 409
//
// A tenant's token reads and writes that tenant only: another tenant's
// recording is 404, never 403, so ids do not leak. An admin token names
// the tenant in the body (tenant_id) or the query (?tenant=). Bodies are
// strict (internal/strictjson): Content-Type exactly application/json
// (415 otherwise: application/jsonp is not JSON), size-limited, keys
// matched case-sensitively ("TENANT_ID" is not tenant_id), a key twice in
// one object, unknown fields and trailing data refused, errors naming the
// key by its path. Ids (tenant_id, call_id, model, language, the audio
// key, and a read's {call_id} and ?tenant=) refuse control characters and
// invisible format and bidirectional control characters such as U+200B or
// U+202E (internal/idtext), naming the field and the byte. Audio keys are confined to the tenant's part of the
// recordings root ("<tenant>/..."), by the store, through symbolic links
// too. A 422 about audio says only "audio not found or not readable" (a
// missing file, a path or link that leaves the tenant's part, a directory,
// ...: one answer, so it reveals nothing about what exists) or "audio
// refused: ..." (too large, not the format its name says), with a
// request_id; the details, paths included, go to the server's log under
// that id.
package ingest

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/internal/idtext"
	"github.com/callscribe/callscribe/internal/route"
	"github.com/callscribe/callscribe/internal/strictjson"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/ledger"
)

// Limits of a request.
const (
	MaxBodyBytes      = 64 << 10
	MaxBatchBodyBytes = 1 << 20
	MaxBatch          = 500
	MaxPage           = 500
)

// Authenticator says whom a bearer token speaks for (auth.Store).
type Authenticator interface {
	Authenticate(ctx context.Context, bearer string) (auth.Principal, error)
}

// Config is what the API serves from.
type Config struct {
	Pipeline *jobs.Pipeline
	Ledger   *ledger.Ledger
	// Client inserts the transcribe jobs (the process's River client).
	Client *river.Client[pgx.Tx]
	Auth   Authenticator
	Logger *slog.Logger
}

type api struct{ cfg Config }

// NewHandler returns the API's routes (mount it at the server's root).
func NewHandler(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &api{cfg: cfg}
	mux := http.NewServeMux()
	for _, e := range a.endpoints() {
		mux.HandleFunc(e.Method+" "+cmp.Or(e.pattern, e.Path), a.auth(e.fn))
	}
	return mux
}

// endpoint is one operation of the API and the function that answers it.
type endpoint struct {
	route.Route
	// pattern is the http.ServeMux pattern's path when it is not Path
	// (a path parameter with a suffix, which the function parses).
	pattern string
	fn      http.HandlerFunc
}

// endpoints is the API's route table: what NewHandler registers and
// Routes lists.
func (a *api) endpoints() []endpoint {
	return []endpoint{
		{Route: route.Route{Method: http.MethodPost, Path: "/v1/recordings"}, fn: a.create},
		{Route: route.Route{Method: http.MethodPost, Path: "/v1/recordings:batch"}, fn: a.batch},
		{Route: route.Route{Method: http.MethodGet, Path: "/v1/recordings"}, fn: a.list},
		{Route: route.Route{Method: http.MethodGet, Path: "/v1/recordings/{call_id}"}, fn: a.byCall},
		{Route: route.Route{Method: http.MethodPost, Path: "/v1/recordings/{id}:retry"}, pattern: "/v1/recordings/{action}", fn: a.action},
	}
}

// Routes lists the operations NewHandler's handler serves, from the table
// it registers. Mount the handler at "/v1/recordings", "/v1/recordings/"
// and "/v1/recordings:batch".
func Routes() []route.Route {
	var out []route.Route
	for _, e := range (&api{}).endpoints() {
		out = append(out, e.Route)
	}
	return out
}

type principalKey struct{}

func principalOf(r *http.Request) auth.Principal {
	p, _ := r.Context().Value(principalKey{}).(auth.Principal)
	return p
}

func (a *api) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			unauthorized(w)
			return
		}
		p, err := a.cfg.Auth.Authenticate(r.Context(), strings.TrimSpace(cred))
		if errors.Is(err, auth.ErrInvalid) {
			unauthorized(w)
			return
		}
		if err != nil {
			a.cfg.Logger.Warn("ingest api: checking a token", slog.String("error", err.Error()))
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "unavailable", "", "the token could not be checked now; retry")
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="callscribe"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", "", "missing or wrong bearer token")
}

// fieldError is a refused field.
type fieldError struct {
	status      int
	typ, field  string
	msg         string
	notYourData bool
	requestID   string // for the answer, when the details went to the log
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func invalid(field, format string, args ...any) *fieldError {
	return &fieldError{status: http.StatusBadRequest, typ: "invalid_request", field: field, msg: fmt.Sprintf(format, args...)}
}

// request turns an item into an ingest request for principal p.
func request(p auth.Principal, it Item) (jobs.IngestRequest, *fieldError) {
	req, err := it.Request(For{Tenant: p.Tenant, Admin: p.Admin, ConfineAudio: true})
	var ie *ItemError
	if errors.As(err, &ie) {
		if ie.NotYours {
			// Not this token's tenant: as if it did not exist.
			return jobs.IngestRequest{}, &fieldError{status: http.StatusNotFound, typ: "not_found", field: ie.Field, msg: ie.Msg, notYourData: true}
		}
		return jobs.IngestRequest{}, invalid(ie.Field, "%s", ie.Msg)
	}
	return req, nil
}

// ingest ingests one item: the recording and whether it is new, or the
// refusal.
func (a *api) ingest(ctx context.Context, p auth.Principal, it Item) (jobs.IngestResult, *fieldError) {
	req, fe := request(p, it)
	if fe != nil {
		return jobs.IngestResult{}, fe
	}
	res, err := a.cfg.Pipeline.Ingest(ctx, a.cfg.Client, req)
	if err != nil {
		return res, a.refusal(req, -1, err)
	}
	return res, nil
}

// Messages of a refused recording's audio, the same whatever the path: the
// details stay in the server's log.
const (
	msgAudioUnavailable = "audio not found or not readable"
	msgAudioRefused     = "audio refused"
)

// newRequestID returns a random id that ties an answer to its log line.
func newRequestID() string { return uuid.NewString() }

// refusal is how the API answers Ingest's error for req (the index-th item
// of a batch; -1 for a single one). An audio refusal's answer is generic
// and names no path: a missing file and one the store refuses (outside the
// tenant's part, through a link, not a regular file) get the same type and
// message, so that the answer is no oracle for what exists on the server.
// The error itself, which may name the server's paths, is logged with a
// request id that the answer carries.
func (a *api) refusal(req jobs.IngestRequest, index int, err error) *fieldError {
	var reqErr *jobs.RequestError
	var keyErr *audio.KeyError
	var tooLarge *audio.TooLargeError
	var fe *fieldError
	switch {
	case errors.As(err, &reqErr):
		return invalid(reqErr.Field, "%s", reqErr.Detail)
	case errors.Is(err, jobs.ErrUnknownTenant):
		return &fieldError{status: http.StatusNotFound, typ: "not_found", field: "tenant_id", msg: "no such tenant"}
	case errors.Is(err, audio.ErrNotFound), errors.As(err, &keyErr):
		fe = &fieldError{status: http.StatusUnprocessableEntity, typ: "audio_not_found", field: "audio", msg: msgAudioUnavailable}
	case errors.As(err, &tooLarge):
		fe = &fieldError{status: http.StatusUnprocessableEntity, typ: "audio_too_large", field: "audio",
			msg: fmt.Sprintf("%s: larger than the %d-byte limit", msgAudioRefused, tooLarge.Limit)}
	case errors.Is(err, audio.ErrFormat):
		fe = &fieldError{status: http.StatusUnprocessableEntity, typ: "audio_unreadable", field: "audio",
			msg: msgAudioRefused + ": not in the format its name says"}
	default:
		fe = &fieldError{status: http.StatusInternalServerError, typ: "internal", msg: "ingesting the recording failed"}
	}
	fe.requestID = newRequestID()
	attrs := []any{slog.String("request_id", fe.requestID), slog.String("tenant", req.TenantID),
		slog.String("call_id", req.CallID), slog.String("audio", req.Audio), slog.String("error", err.Error())}
	if index >= 0 {
		attrs = append(attrs, slog.Int("index", index))
	}
	if fe.status == http.StatusInternalServerError {
		a.cfg.Logger.Error("ingest api: ingesting", attrs...)
	} else {
		a.cfg.Logger.Info("ingest api: audio refused", attrs...)
	}
	return fe
}

func (a *api) create(w http.ResponseWriter, r *http.Request) {
	var it Item
	if fe := decode(w, r, MaxBodyBytes, &it); fe != nil {
		writeFieldError(w, fe)
		return
	}
	res, fe := a.ingest(r.Context(), principalOf(r), it)
	if fe != nil {
		writeFieldError(w, fe)
		return
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, map[string]any{"recording": res.Recording, "created": res.Created})
}

func (a *api) batch(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Items []Item `json:"items"`
	}
	if fe := decode(w, r, MaxBatchBodyBytes, &body); fe != nil {
		writeFieldError(w, fe)
		return
	}
	switch {
	case len(body.Items) == 0:
		writeFieldError(w, invalid("items", "is empty"))
		return
	case len(body.Items) > MaxBatch:
		writeFieldError(w, &fieldError{status: http.StatusRequestEntityTooLarge, typ: "too_large", field: "items",
			msg: fmt.Sprintf("%d items, at most %d", len(body.Items), MaxBatch)})
		return
	}
	type result struct {
		Index     int               `json:"index"`
		Status    int               `json:"status"`
		Recording *ledger.Recording `json:"recording,omitempty"`
		Error     *errorBody        `json:"error,omitempty"`
	}
	out := make([]result, len(body.Items))
	failed := 0
	refuse := func(i int, fe *fieldError) {
		failed++
		e := fe.body()
		out[i] = result{Index: i, Status: fe.status, Error: &e}
	}
	// The items the API takes are ingested together (one transaction).
	var reqs []jobs.IngestRequest
	var at []int
	for i, it := range body.Items {
		req, fe := request(principalOf(r), it)
		if fe != nil {
			refuse(i, fe)
			continue
		}
		reqs, at = append(reqs, req), append(at, i)
	}
	if len(reqs) > 0 {
		// A failed transaction is every item's error (an internal one).
		res, _ := a.cfg.Pipeline.IngestMany(r.Context(), a.cfg.Client, reqs)
		for k, ir := range res {
			i := at[k]
			if ir.Err != nil {
				refuse(i, a.refusal(reqs[k], i, ir.Err))
				continue
			}
			rec := ir.Recording
			out[i] = result{Index: i, Status: map[bool]int{true: http.StatusCreated, false: http.StatusOK}[ir.Created], Recording: &rec}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out, "failed": failed})
}

// recordingWithEvents is a recording and its history.
type recordingWithEvents struct {
	ledger.Recording
	Events []ledger.Event `json:"events"`
}

func (a *api) withEvents(ctx context.Context, recs []ledger.Recording) ([]recordingWithEvents, error) {
	out := make([]recordingWithEvents, len(recs))
	for i, rec := range recs {
		evs, err := a.cfg.Ledger.Events(ctx, rec.ID)
		if err != nil {
			return nil, err
		}
		out[i] = recordingWithEvents{Recording: rec, Events: evs}
	}
	return out, nil
}

// tenantOf is the tenant a read names: a tenant token's own; an admin's
// ?tenant= (required).
func tenantOf(r *http.Request) (string, *fieldError) {
	p := principalOf(r)
	q := r.URL.Query().Get("tenant")
	if prob := idtext.Problem(q); prob != "" {
		return "", invalid("tenant", "%s", prob)
	}
	switch {
	case p.Admin && q == "":
		return "", invalid("tenant", "is required with an admin token")
	case p.Admin:
		return q, nil
	case q != "" && q != p.Tenant:
		return "", &fieldError{status: http.StatusNotFound, typ: "not_found", field: "tenant", msg: "no such tenant"}
	}
	return p.Tenant, nil
}

func (a *api) byCall(w http.ResponseWriter, r *http.Request) {
	tenant, fe := tenantOf(r)
	if fe != nil {
		writeFieldError(w, fe)
		return
	}
	callID := r.PathValue("call_id")
	if p := idtext.Problem(callID); p != "" {
		writeFieldError(w, invalid("call_id", "%s", p))
		return
	}
	recs, err := a.cfg.Ledger.RecordingsByCall(r.Context(), tenant, callID)
	if err != nil {
		a.internal(w, "reading a call", err)
		return
	}
	if len(recs) == 0 {
		writeError(w, http.StatusNotFound, "not_found", "call_id", "no recording of that call")
		return
	}
	out, err := a.withEvents(r.Context(), recs)
	if err != nil {
		a.internal(w, "reading events", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"recordings": out})
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	tenant, fe := tenantOf(r)
	if fe != nil {
		writeFieldError(w, fe)
		return
	}
	q := r.URL.Query()
	f := ledger.PageFilter{TenantID: tenant, Limit: 100}
	if s := q.Get("state"); s != "" {
		if !ledger.State(s).Valid() {
			writeFieldError(w, invalid("state", "%q is not a state", s))
			return
		}
		f.State = ledger.State(s)
	}
	if l := q.Get("lane"); l != "" {
		if l != string(ledger.LaneImmediate) && l != string(ledger.LaneBatch) {
			writeFieldError(w, invalid("lane", "%q: want immediate or batch", l))
			return
		}
		f.Lane = ledger.Lane(l)
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxPage {
			writeFieldError(w, invalid("limit", "want 1-%d", MaxPage))
			return
		}
		f.Limit = n
	}
	if c := q.Get("cursor"); c != "" {
		cur, ok := parseCursor(c)
		if !ok {
			writeFieldError(w, invalid("cursor", "is not a cursor this API gave"))
			return
		}
		f.After = cur
	}
	recs, next, err := a.cfg.Ledger.RecordingPage(r.Context(), f)
	if err != nil {
		a.internal(w, "listing recordings", err)
		return
	}
	out, err := a.withEvents(r.Context(), recs)
	if err != nil {
		a.internal(w, "reading events", err)
		return
	}
	resp := map[string]any{"recordings": out}
	if !next.IsZero() {
		resp["next_cursor"] = formatCursor(next)
	}
	writeJSON(w, http.StatusOK, resp)
}

// action is POST /v1/recordings/{id}:retry.
func (a *api) action(w http.ResponseWriter, r *http.Request) {
	idText, verb, ok := strings.Cut(r.PathValue("action"), ":")
	if !ok || verb != "retry" {
		writeError(w, http.StatusNotFound, "not_found", "", "no route "+r.URL.Path)
		return
	}
	if !principalOf(r).Admin {
		// Operator endpoint; a tenant token learns nothing about the id.
		writeError(w, http.StatusNotFound, "not_found", "id", "no such recording")
		return
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		writeFieldError(w, invalid("id", "is not a recording id"))
		return
	}
	rec, err := a.cfg.Pipeline.Retry(r.Context(), a.cfg.Client, id, "retried through the API")
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "id", "no such recording")
	case errors.Is(err, jobs.ErrNotReviewable), errors.Is(err, jobs.ErrJobRunning):
		writeError(w, http.StatusConflict, "conflict", "id", err.Error())
	case err != nil:
		a.internal(w, "retrying a recording", err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"recording": rec})
	}
}

func (a *api) internal(w http.ResponseWriter, what string, err error) {
	a.cfg.Logger.Error("ingest api: "+what, slog.String("error", err.Error()))
	writeError(w, http.StatusInternalServerError, "internal", "", what+" failed")
}

// decode reads a JSON body strictly (internal/strictjson): Content-Type
// exactly application/json, at most limit bytes, names matched
// case-sensitively, no duplicate or unknown names, nothing after the
// value. A refusal names the key and its path.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) *fieldError {
	if p := strictjson.MediaTypeProblem(r.Header.Get("Content-Type")); p != "" {
		return &fieldError{status: http.StatusUnsupportedMediaType, typ: "unsupported_media_type", msg: p + ": send Content-Type: application/json"}
	}
	err := strictjson.Decode(http.MaxBytesReader(w, r.Body, limit), v)
	var tooLarge *http.MaxBytesError
	var bad *strictjson.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		return &fieldError{status: http.StatusRequestEntityTooLarge, typ: "too_large", msg: fmt.Sprintf("the body is over %d bytes", limit)}
	case errors.As(err, &bad) && (bad.Kind == strictjson.Syntax || bad.Kind == strictjson.Empty):
		return invalid("", "the body is not JSON: %s", strings.TrimPrefix(bad.Error(), "bad JSON: "))
	case errors.As(err, &bad) && bad.Kind == strictjson.Unknown:
		return invalid(bad.Field(), "%s: not a field of this request", bad.Error())
	case errors.As(err, &bad):
		return invalid(bad.Field(), "%s", bad.Error())
	}
	return invalid("", "reading the body: %v", err)
}

type errorBody struct {
	Type    string `json:"type"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// RequestID names the server's log line with the details, when there
	// is one (a refused recording's audio, an internal error).
	RequestID string `json:"request_id,omitempty"`
}

func (e *fieldError) body() errorBody {
	return errorBody{Type: e.typ, Field: e.field, Message: e.msg, RequestID: e.requestID}
}

func writeFieldError(w http.ResponseWriter, fe *fieldError) {
	writeJSON(w, fe.status, map[string]any{"error": fe.body()})
}

func writeError(w http.ResponseWriter, status int, typ, field, msg string) {
	writeJSON(w, status, map[string]any{"error": errorBody{Type: typ, Field: field, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func formatCursor(c ledger.PageCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + c.ID.String()))
}

func parseCursor(s string) (ledger.PageCursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return ledger.PageCursor{}, false
	}
	micros, id, ok := strings.Cut(string(b), ".")
	if !ok {
		return ledger.PageCursor{}, false
	}
	n, err := strconv.ParseInt(micros, 10, 64)
	u, err2 := uuid.Parse(id)
	if err != nil || err2 != nil || u == uuid.Nil {
		return ledger.PageCursor{}, false
	}
	return ledger.PageCursor{CreatedAt: time.UnixMicro(n).UTC(), ID: u}, true
}
