package httpapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/route"
)

// Defaults and bounds of the HTTP API.
const (
	// MaxBodyDefault is Options.MaxBodyBytes's default: 64 KiB,
	// room for a refresh of about 300 leases.
	MaxBodyDefault = 64 << 10
	// SlotWaitMax is the longest timeout_ms POST /v1/slots (and
	// /v1/calls:start, /v1/gate/enter) accepts: a dispatcher may wait up to
	// two minutes for a slot; the request holds its connection meanwhile.
	SlotWaitMax = 120 * time.Second
	// SlotRetryDefault is how often a waiting POST /v1/slots asks Redis
	// again when retry_ms is omitted (or 0).
	SlotRetryDefault = time.Second
	// SlotWaitersDefault is Options.MaxSlotWaiters's default.
	SlotWaitersDefault = 256
	// DialWaitersDefault is Options.MaxDialWaiters's default.
	DialWaitersDefault = 128
	// OrgLeaseShareDefault is Options.OrgLeaseShare's default: one
	// organisation may hold half of a provider's slots through POST
	// /v1/leases.
	OrgLeaseShareDefault = 0.5
)

// Options configures NewHandler.
type Options struct {
	// Logger receives request failures that are the server's. Default nil:
	// discard.
	Logger *slog.Logger
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); others get 401. Default "": no
	// authentication, so bind the server to a private address.
	Token string
	// MaxBodyBytes caps a request body; a larger one gets 413.
	// Default 0: MaxBodyDefault (64 KiB).
	MaxBodyBytes int64
	// Agents: each agent's providers, primary first, then fallbacks, for
	// POST /v1/calls/{call_id}/transcriber. Default nil: that route answers
	// 404 unknown agent.
	Agents map[string]live.CallProviders
	// Authenticate, when set, says whom a bearer token speaks for: an
	// organisation (org), or an admin. A request whose token it refuses
	// (ok false) gets 401, counted in /v1/status's auth_failures; when it
	// cannot tell (err: its database is down), 503 with Retry-After: 1. An
	// organisation's token acts only for that organisation: a slot or a
	// call of another gets 404, as if it did not exist. Token, when also
	// set, is accepted as an admin token. Default nil: Token alone.
	Authenticate func(ctx context.Context, bearer string) (org string, admin, ok bool, err error)
	// MaxSlotWaiters caps the POST /v1/slots requests with timeout_ms > 0
	// that wait at once in this process; one more gets 503 busy with
	// Retry-After: 1 at once. Requests with timeout_ms 0 try once and are
	// not counted. POST /v1/calls:start and /v1/gate/enter requests that
	// wait count against the same cap. Default 0: SlotWaitersDefault (256).
	MaxSlotWaiters int
	// Dialer, when set, serves the dial queue shared through Redis:
	// /v1/calls/{call_id}/dial, /answered, /ended and /v1/dial-queue.
	// Build it with DetachLeases (the client refreshes its leases).
	// Default nil: those routes answer 501.
	Dialer *live.Dialer
	// Timeline, when set, records each call's over-limit connections,
	// fallbacks, voice overflows and waits, and dial steps, and serves
	// /v1/calls/{call_id}/timeline. Default nil: nothing is recorded and
	// that route answers 501.
	Timeline *live.Timeline
	// Starts, when set, is the call start rate behind POST /v1/calls:start
	// (per campaign of an organisation and, when configured, per
	// organisation across its campaigns, counted in Redis). Default nil:
	// that route answers 501.
	Starts *live.RateLimiter
	// Gate, when set, is the admission gate behind POST /v1/gate/enter
	// and /v1/gate/leave: one semaphore in Redis, shared by every process
	// with a gate of its name, so a ticket given by one is left through
	// any (its TTL is the gate's, live.GateConfig.TicketTTL). Default nil:
	// those routes answer 501.
	Gate *live.Gate
	// CallerIDs holds the organisations' caller-ID pools for the
	// /v1/caller-ids routes. Default nil: those routes answer 501.
	CallerIDs *capacity.CallerIDs
	// OrgLeaseShare is the share of each provider/kind's effective limit
	// that one organisation may hold at once through POST /v1/leases, in
	// (0, 1]: ceil(limit × share), at least 1. Admin tokens (and requests
	// without authentication) are not limited by it. Default 0:
	// OrgLeaseShareDefault (0.5).
	OrgLeaseShare float64
	// MaxDialWaiters caps the GET /v1/calls/{call_id}/dial requests with
	// wait_ms > 0 that wait at once in this process; one more gets 429
	// too_many_waiters with Retry-After: 1 at once. Default 0:
	// DialWaitersDefault (128).
	MaxDialWaiters int
	// RefusalReportEvery is how often, at most, one organisation's token
	// has a refusal of one provider/kind taken through POST
	// /v1/providers/{provider}/{kind}/refusals in this process; a report
	// sooner gets 429 rate_limited with Retry-After. Admin tokens (and
	// requests without authentication) are not paced. Default 0:
	// RefusalReportEveryDefault (1s).
	RefusalReportEvery time.Duration
	// Shutdown, when set, is closed when the server begins to shut down:
	// every request still waiting (a dial long-poll, a slot, start or gate
	// wait) stops waiting and is answered at once, so that none is cut
	// without an answer. Default nil: waits run to their end.
	Shutdown <-chan struct{}
}

// NewHandler returns the JSON HTTP API through which live-call runtimes
// in other languages take and give back vendor leases and call slots. slots
// may be nil: the /v1/slots and /v1/calls routes then answer 501.
//
// Routes (all bodies JSON; errors are {"error":{"type","message",...}};
// Routes lists them from the table the handler registers, and
// docs/openapi.json describes each in full):
//
//	POST /v1/leases                    {provider, kind, holder, lane} → 200 {granted, lease, in_use, limit, uncounted, org_in_use, org_quota, over_quota}
//	POST /v1/leases/refresh            {leases:[lease...]}            → 200 {refreshed, lost, failed} | 404 not_found
//	POST /v1/leases/release            {lease}                        → 204 | 404 not_found
//	POST /v1/slots                     {org, campaign, timeout_ms, retry_ms} → 200 {slot} | 409 no_slot | 503 busy
//	POST /v1/slots/bind                {slot, call_id}                → 204 | 409 already_bound | 409 slot_not_held
//	POST /v1/slots/release             {slot}                         → 204
//	POST /v1/calls/{call_id}/release   {org}                          → 204 (also when nothing is bound)
//	POST /v1/calls/{call_id}/transcriber {agent}                      → 200 {provider, lease, over_limit, fell_back}
//	POST /v1/calls/{call_id}/voice/start {agent}                      → 200 {provider, lease, fell_back, over_limit, waited_ms}
//	POST /v1/calls/{call_id}/voice/done  {lease}                      → 204 | 404 not_found
//	POST /v1/calls/{call_id}/dial        {agent}                      → 200 {state:"reserved", transcriber, voice} | 202 {state:"queued", waiting_for, position, queued_at}
//	GET  /v1/calls/{call_id}/dial?wait_ms=                            → 200 reserved/answered | 202 queued | 404 not_found | 429 too_many_waiters | 503 busy
//	POST /v1/calls/{call_id}/answered                                 → 200 {transcriber} | 409 not_reserved | 404 not_found
//	POST /v1/calls/{call_id}/ended                                    → 204
//	GET  /v1/calls/{call_id}/timeline                                 → 200 {call_id, events:[{at, kind, provider, detail}]} | 404 not_found
//	GET  /v1/dial-queue                                               → 200 {calls:[{org, call_id, agent, queued_at, waiting_for, position}]} (admin)
//	POST /v1/calls:start               {org, campaign, timeout_ms}    → 200 {started, waited_ms} | 429 rate_limited {limited_by}
//	POST /v1/gate/enter                {timeout_ms, call_id}          → 200 {ticket, call_id, expires_at, waited_ms, in_use, size, uncounted} | 429 gate_full | 503 busy
//	POST /v1/gate/leave                {ticket}                       → 204 | 404 unknown_ticket
//	GET  /v1/status                                                   → 200 {providers, live_calls, auth_failures} (admin) | 200 {org, live_calls} (organisation)
//	POST /v1/providers/{provider}/{kind}/refusals {in_use}             → 200 {provider, kind, reported_in_use, in_use, configured_limit, limit_before, limit_after, lowered, failed} | 404 not_found | 429 rate_limited
//	POST /v1/caller-ids:acquire        {org, call_id}                 → 200 {number, token, org, call_id, busy_since} | 409 no_caller_id | 503 caller_ids_unavailable
//	POST /v1/caller-ids:release        {org, number, token}           → 204
//	GET  /v1/caller-ids?org=ORG                                       → 200 {org, free, busy, stale, numbers}
//
// A lease or slot object is sent back exactly as it was received.
// Organisation, campaign, call and slot ids are 1–128 bytes of A-Z a-z 0-9
// . _ - (capacity.CheckID); others get 400 naming the field. A call is
// bound within its slot's organisation and released by that organisation
// only: another organisation's release gets 404, as for an unknown call.
// POST /v1/slots waits up to timeout_ms (0–120000, SlotWaitMax), asking
// again every retry_ms (omitted or 0: 1000, SlotRetryDefault; below 50
// raised to 50, capacity.RetryIntervalMin). The
// server keeps no lease alive for an HTTP client: the client refreshes its
// own leases through /v1/leases/refresh before they expire, so the leases
// of a client that dies lapse on their own. Like the library, the API fails
// open: when Redis is down, acquires answer 200 granted and uncounted and
// releases 204, never 5xx; a dial, its state and
// its answer go ahead uncounted ({"uncounted": true}). Only the operator's
// reads (/v1/status, a timeline, the dial queue) answer 503 without Redis.
// The dial queue and timelines live in Redis, so any number of serve
// processes behind a load balancer answer alike. Request bodies must be Content-Type
// application/json exactly (a charset only utf-8; application/jsonp,
// application/json-seq, text/json: 415), which also keeps browsers from
// posting to the API cross-origin without a preflight. Keys match their
// fields exactly, case included; an unknown key, a key twice in one
// object, invalid UTF-8 or trailing data gets 400 naming the key by its
// path (internal/strictjson). GET /v1/status is scoped to the caller: an
// organisation's token sees its own live calls only, not the vendor
// leases of every organisation nor auth_failures.
//
// Live calls and leases belong to an organisation. With an
// organisation's token, every /v1/calls/{call_id}/… route reaches that
// organisation's call of the id: in Redis the call is "org/call_id" (its
// dial state, queue entry, timeline, and the holder and id of every lease
// taken for it), so another organisation's call of the same id is another
// call, and naming it answers 404 and touches nothing (POST …/ended, which
// also serves inbound calls the dial queue never knew, answers 204 for
// any id and ends only the caller's own). An admin token (or no
// authentication) reaches the calls of the organisation named by the org
// query parameter, or, without one, the calls of no organisation. A lease
// taken with an organisation's token is named for it (holder
// "org/holder", id "org/holder#…"); refreshing or releasing a lease not
// named for the caller's organisation answers 404. One organisation holds
// at most ceil(limit × Options.OrgLeaseShare) leases of a provider/kind
// through POST /v1/leases (granted false, over_quota true beyond it).
//
// A GET dial with wait_ms > 0 long-polls: at most Options.MaxDialWaiters
// wait at once per process (429 too_many_waiters with Retry-After: 1
// beyond it); the long-polls of one call in one process share one read
// of its state per poll interval. A read of the call's state that times out while this
// process's other reads succeed is load, not an outage: it answers 503
// busy with Retry-After: 1 and the call keeps its place; the read fails
// open (reserved, uncounted) only when Redis refuses connections or no
// read has succeeded for 2 s. When the server begins to shut down
// (Options.Shutdown), a long-poll answers the state it last read, and a
// slot, start or gate wait answers 503 shutting_down, at once.
//
// POST /v1/calls:start takes a start token of the campaign's start rate
// and its organisation's, both or neither (live.RateLimiter; 429 with
// Retry-After, naming the refusing limit in limited_by, when none frees up
// within timeout_ms; fails open: 200 uncounted without Redis). The
// admission gate (live.Gate) is shared through Redis by every serve
// process with a gate of the same name: a ticket given by one is left
// through any, at most the gate's size are held at once over them all, and
// a ticket not left within the gate's TTL is reclaimed, so a client that
// dies does not hold its place forever. A ticket belongs to the
// organisation whose token entered (its call_id, optional, names the call
// in the logs); another organisation's leave is 404. Without Redis, enter
// answers 200 uncounted and leave 204.
//
// A vendor's refusal of a stream is reported through POST
// /v1/providers/{provider}/{kind}/refusals with the leases in use when it
// refused (in_use, 1–RefusalInUseMax, the refused stream's own included):
// below the limit in force, the platform-wide limit of provider/kind is
// lowered to in_use − 1 (at least capacity.LearnedLimitFloor) and an alert
// raised (capacity.Config.OnLimitLearned); at or above it nothing
// changes; nothing raises a limit but the operator's SetLimit. Limits are
// platform-wide, so any authenticated caller may report; an
// organisation's report is judged by no fewer leases than Redis holds
// live, names the organisation in the limit event and the alert, and is
// taken at most once per Options.RefusalReportEvery per provider/kind
// (refusalReport). A provider/kind with no configured limit is 404;
// without Redis the report answers 200 failed (nothing changed).
//
// Caller IDs (Options.CallerIDs) are the exception to failing open: a
// number cannot be invented, so while Redis is down a caller-ID acquire
// answers 503 caller_ids_unavailable with Retry-After: 1 at once (the
// runtime dials with its default number), and a release answers 204 (the
// number comes back after capacity.StaleAfterDefault). Numbers are E.164
// (capacity.CheckNumber); a release with a stale token frees nothing.
func NewHandler(leases *capacity.Leases, slots *capacity.Slots, opts Options) http.Handler {
	if leases == nil {
		panic("httpapi.NewHandler: leases is nil")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = MaxBodyDefault
	}
	if opts.MaxSlotWaiters <= 0 {
		opts.MaxSlotWaiters = SlotWaitersDefault
	}
	if opts.OrgLeaseShare <= 0 || opts.OrgLeaseShare > 1 {
		opts.OrgLeaseShare = OrgLeaseShareDefault
	}
	if opts.MaxDialWaiters <= 0 {
		opts.MaxDialWaiters = DialWaitersDefault
	}
	if opts.RefusalReportEvery <= 0 {
		opts.RefusalReportEvery = RefusalReportEveryDefault
	}
	h := &httpAPI{leases: leases, slots: slots, opts: opts, waiters: make(chan struct{}, opts.MaxSlotWaiters),
		dialWaiters: make(chan struct{}, opts.MaxDialWaiters), dialReads: map[string]*dialRead{},
		refusals: &refusalPace{every: opts.RefusalReportEvery, last: map[string]time.Time{}}}
	mux := http.NewServeMux()
	register(mux, h.endpoints())
	return h.authenticate(mux)
}

// endpoint is one operation of the API and the function that answers it.
type endpoint struct {
	route.Route
	fn http.HandlerFunc
}

// endpoints is the API's route table: what NewHandler registers and
// Routes lists. Its functions are bound to h but not called here, so a
// zero httpAPI lists the same table.
func (h *httpAPI) endpoints() []endpoint {
	post := func(path string, fn http.HandlerFunc) endpoint {
		return endpoint{route.Route{Method: http.MethodPost, Path: path}, fn}
	}
	get := func(path string, fn http.HandlerFunc) endpoint {
		return endpoint{route.Route{Method: http.MethodGet, Path: path}, fn}
	}
	return []endpoint{
		post("/v1/leases", h.leaseAcquire),
		post("/v1/leases/refresh", h.leaseRefresh),
		post("/v1/leases/release", h.leaseRelease),
		post("/v1/slots", h.needSlots(h.slotAcquire)),
		post("/v1/slots/bind", h.needSlots(h.slotBind)),
		post("/v1/slots/release", h.needSlots(h.slotRelease)),
		post("/v1/calls/{call_id}/release", h.needSlots(h.callRelease)),
		post("/v1/calls/{call_id}/transcriber", h.callTranscriber),
		post("/v1/calls:start", h.needStarts(h.callStart)),
		post("/v1/gate/enter", h.needGate(h.gateEnter)),
		post("/v1/gate/leave", h.needGate(h.gateLeave)),
		get("/v1/status", h.status),
		post("/v1/providers/{provider}/{kind}/refusals", h.refusalReport),
		// The voice, dial and timeline routes of live calls.
		post("/v1/calls/{call_id}/voice/start", h.voiceStart),
		post("/v1/calls/{call_id}/voice/done", h.voiceDone),
		post("/v1/calls/{call_id}/dial", h.needDialer(h.dialStart)),
		get("/v1/calls/{call_id}/dial", h.needDialer(h.dialState)),
		post("/v1/calls/{call_id}/answered", h.needDialer(h.callAnswered)),
		post("/v1/calls/{call_id}/ended", h.needDialer(h.callEnded)),
		get("/v1/calls/{call_id}/timeline", h.callTimeline),
		get("/v1/dial-queue", h.needDialer(h.dialQueue)),
		// Caller IDs.
		post("/v1/caller-ids:acquire", h.needCallerIDs(h.callerIDAcquire)),
		post("/v1/caller-ids:release", h.needCallerIDs(h.callerIDRelease)),
		get("/v1/caller-ids", h.needCallerIDs(h.callerIDList)),
	}
}

// Routes lists the operations NewHandler's handler serves, from the table
// it registers: every other path answers 404 not_found, every other
// method of a listed path 405 method_not_allowed with Allow.
func Routes() []route.Route {
	var out []route.Route
	for _, e := range (&httpAPI{}).endpoints() {
		out = append(out, e.Route)
	}
	return out
}

// register adds the endpoints to mux, one pattern per path answering its
// methods (405 with Allow for the others), and a 404 for every other path.
func register(mux *http.ServeMux, endpoints []endpoint) {
	byPath := map[string]map[string]http.HandlerFunc{}
	var paths []string
	for _, e := range endpoints {
		if byPath[e.Path] == nil {
			byPath[e.Path] = map[string]http.HandlerFunc{}
			paths = append(paths, e.Path)
		}
		byPath[e.Path][e.Method] = e.fn
	}
	for _, p := range paths {
		byMethod := byPath[p]
		allowed := slices.Sorted(maps.Keys(byMethod))
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			fn, ok := byMethod[r.Method]
			if !ok {
				w.Header().Set("Allow", strings.Join(allowed, ", "))
				writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
					fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")), nil)
				return
			}
			fn(w, r)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route "+r.URL.Path, nil)
	})
}

type httpAPI struct {
	leases *capacity.Leases
	slots  *capacity.Slots
	opts   Options
	// waiters holds a token per POST /v1/slots request that waits.
	waiters chan struct{}
	// dialWaiters holds a token per GET dial request that long-polls.
	dialWaiters chan struct{}
	// redisReadOK is when a dial state was last read from Redis (Unix
	// nanoseconds): a read that times out while others succeed is load,
	// not an outage, and never becomes a grant.
	redisReadOK atomic.Int64
	// dialReads: the latest read of each long-polled call's dial state,
	// shared by the long-polls of that call (sharedDialState).
	dialReadsMu sync.Mutex
	dialReads   map[string]*dialRead
	// refusals paces the organisations' refusal reports.
	refusals *refusalPace
	// authFailures counts the requests refused with 401.
	authFailures atomic.Uint64
}

func (h *httpAPI) authenticate(next http.Handler) http.Handler {
	if h.opts.Token == "" && h.opts.Authenticate == nil {
		return next
	}
	want := []byte(h.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is case-insensitive (RFC 9110 section 11.1).
		scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		cred = strings.TrimSpace(cred)
		var c caller
		switch {
		case !ok || !strings.EqualFold(scheme, "Bearer") || cred == "":
			ok = false
		case h.opts.Token != "" && subtle.ConstantTimeCompare([]byte(cred), want) == 1:
			c.admin = true
		case h.opts.Authenticate != nil:
			org, admin, valid, err := h.opts.Authenticate(r.Context(), cred)
			if err != nil {
				h.opts.Logger.Warn("capacity http: checking a token", slog.String("error", err.Error()))
				w.Header().Set("Retry-After", "1")
				writeError(w, http.StatusServiceUnavailable, "unavailable", "the token could not be checked now; retry", nil)
				return
			}
			ok = valid && (admin || org != "")
			c = caller{org: org, admin: admin}
		default:
			ok = false
		}
		if !ok {
			h.authFailures.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer realm="callscribe capacity"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token", nil)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// waitCtx is the context of a request that may wait: the request's, also
// ended when the server begins to shut down (Options.Shutdown).
func (h *httpAPI) waitCtx(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	if h.opts.Shutdown != nil {
		go func() {
			select {
			case <-h.opts.Shutdown:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// shuttingDown reports whether the server has begun to shut down.
func (h *httpAPI) shuttingDown() bool {
	select {
	case <-h.opts.Shutdown: // nil: never
		return true
	default:
		return false
	}
}

// waitEnded answers a wait that ended without its answer: the server is
// shutting down (503, retry on another process), or the client has gone
// (nobody reads the answer).
func (h *httpAPI) waitEnded(w http.ResponseWriter, err error) {
	if h.shuttingDown() {
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusServiceUnavailable, "shutting_down", "this server is shutting down: retry (another process, or this one restarted, answers)", nil)
		return
	}
	writeError(w, http.StatusServiceUnavailable, "canceled", err.Error(), nil)
}

// caller is whom a request's token speaks for.
type caller struct {
	org   string
	admin bool
}

type callerKey struct{}

// mayAct reports whether the request may act for organisation org: always
// without authentication or with an admin token; with an organisation's
// token, for that organisation only.
func mayAct(r *http.Request, org string) bool {
	c, ok := r.Context().Value(callerKey{}).(caller)
	return !ok || c.admin || c.org == org
}

// orgOf returns the organisation the request's token speaks for: "" for
// an admin token or without authentication.
func orgOf(r *http.Request) string {
	c, _ := r.Context().Value(callerKey{}).(caller)
	if c.admin {
		return ""
	}
	return c.org
}

// callOrg returns the organisation whose live calls the request reaches:
// an organisation's token reaches its own only (an org query parameter
// naming another is answered 404); an admin token, or a request without
// authentication, reaches the organisation its org query parameter names,
// or, without one, the calls that belong to no organisation. On failure
// it has written the answer.
func callOrg(w http.ResponseWriter, r *http.Request) (string, bool) {
	q := r.URL.Query().Get("org")
	if q != "" {
		if err := checkID("org", q); err != nil {
			writeInvalid(w, err)
			return "", false
		}
	}
	if own := orgOf(r); own != "" {
		if q != "" && q != own {
			notYours(w, "call")
			return "", false
		}
		return own, true
	}
	return q, true
}

// ownedID is how an organisation's live call, lease holder and lease id
// are named in Redis: "org/id", so that every key and value records its
// owner and no two organisations' ids meet. Ids of no organisation are
// kept as they are; ids never hold "/" (checkID), so the two cannot be
// confused.
func ownedID(org, id string) string {
	if org == "" {
		return id
	}
	return org + "/" + id
}

// localID is ownedID's inverse: the id as its organisation knows it.
func localID(id string) string {
	if _, local, ok := strings.Cut(id, "/"); ok {
		return local
	}
	return id
}

// ownsLease reports whether the request may refresh or release the lease
// of that id: an admin token (or no authentication) any lease; an
// organisation's token only those taken for it (ownedID's prefix).
func ownsLease(r *http.Request, id string) bool {
	c, authed := r.Context().Value(callerKey{}).(caller)
	return !authed || c.admin || c.org != "" && strings.HasPrefix(id, c.org+"/")
}

// notYours answers a request for another organisation's slot or call as
// if it did not exist.
func notYours(w http.ResponseWriter, what string) {
	writeError(w, http.StatusNotFound, "not_found", "the organisation has no "+what+" of that id", nil)
}
