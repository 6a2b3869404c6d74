package connector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/internal/vendorhttp/conntest"
)

// TestWebhookRequest checks the request side: method, path under a base
// path, headers, and the body byte for byte against the golden body of
// the protocol's example set.
func TestWebhookRequest(t *testing.T) {
	t.Parallel()
	f := newFakeCRM(t, answer(201, fixture(t, "webhook", "created.json")))
	cfg := f.config(KindWebhook)
	cfg.BaseURL += "/crm/" // a path prefix, with a trailing slash
	tg, err := New(cfg)
	mustNoErr(t, err)
	got, err := tg.Deliver(t.Context(), Delivery{Set: fixedSet(), Attempt: 3})
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeApplied, ClassApplied, 201)

	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/crm/v1/action-sets" {
		t.Errorf("request %s %s, want POST /crm/v1/action-sets", r.Method, r.Path)
	}
	for name, want := range map[string]string{
		"Authorization":      "Bearer " + testToken,
		"Idempotency-Key":    "t1:call-42:1",
		"X-Delivery-Attempt": "3",
		"Content-Type":       "application/json; charset=utf-8",
		"Accept":             "application/json",
	} {
		if v := r.Header.Get(name); v != want {
			t.Errorf("%s = %q, want %q", name, v, want)
		}
	}
	want := compactJSON(t, fixture(t, "webhook", "request.json"))
	if !bytes.Equal(r.Body, want) {
		t.Errorf("body\n got %s\nwant %s", r.Body, want)
	}
	body, err := WebhookBody(fixedSet())
	mustNoErr(t, err)
	if !bytes.Equal(body, want) {
		t.Errorf("WebhookBody\n got %s\nwant %s", body, want)
	}
}

// TestWebhookBodyPrecision: committed_at is UTC to the second, the window
// keeps its offset, whatever precision and zone the set carries.
func TestWebhookBodyPrecision(t *testing.T) {
	t.Parallel()
	s := fixedSet()
	s.CommittedAt = s.CommittedAt.Add(123456789).In(s.Actions[2].Window.Start.Location()) // ns, not UTC
	s.Actions[2].Window.Start = s.Actions[2].Window.Start.Add(999)
	body, err := WebhookBody(s)
	mustNoErr(t, err)
	want := compactJSON(t, fixture(t, "webhook", "request.json"))
	if !bytes.Equal(body, want) {
		t.Errorf("body\n got %s\nwant %s", body, want)
	}
}

// TestWebhookResponseTable drives Deliver through every row of the
// crm-webhook/v1 response table, and the edges around it.
func TestWebhookResponseTable(t *testing.T) {
	t.Parallel()
	rl := fixture(t, "webhook", "error_rate_limited.json")
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		outcome    Outcome
		class      string
		status     int
		crmID      string
		retryAfter *string
		message    string // a substring of Message
	}{
		{name: "201 applied", handler: answer(201, fixture(t, "webhook", "created.json")),
			outcome: OutcomeApplied, class: ClassApplied, status: 201, crmID: "crm_789"},
		{name: "200 replayed", handler: answer(200, fixture(t, "webhook", "replayed.json")),
			outcome: OutcomeReplayed, class: ClassReplayed, status: 200, crmID: "crm_789"},
		{name: "201 with unknown fields", handler: answer(201, []byte(`{"id": "crm_1", "applied_at": "2026-11-29T17:04:06Z", "extra": {"x": 1}}`)),
			outcome: OutcomeApplied, class: ClassApplied, status: 201, crmID: "crm_1"},
		{name: "409 idempotency_key_reused", handler: answer(409, fixture(t, "webhook", "error_idempotency_key_reused.json")),
			outcome: OutcomeDead, class: ClassIdempotencyKeyReused, status: 409, message: "different body"},
		{name: "409 of another type", handler: answer(409, []byte(`{"error": {"type": "locked", "message": "record locked"}}`)),
			outcome: OutcomeDead, class: ClassConflict, status: 409, message: "record locked"},
		{name: "409 without a body", handler: answer(409, nil),
			outcome: OutcomeDead, class: ClassConflict, status: 409, message: "Conflict"},
		{name: "400", handler: answer(400, fixture(t, "webhook", "error_invalid_request.json")),
			outcome: OutcomeDead, class: ClassInvalidRequest, status: 400, message: "not valid JSON"},
		{name: "401", handler: answer(401, fixture(t, "webhook", "error_unauthorized.json")),
			outcome: OutcomeDead, class: ClassUnauthorized, status: 401},
		{name: "403", handler: answer(403, fixture(t, "webhook", "error_forbidden.json")),
			outcome: OutcomeDead, class: ClassForbidden, status: 403, message: "tenant t1"},
		{name: "404", handler: answer(404, fixture(t, "webhook", "error_not_found.json")),
			outcome: OutcomeDead, class: ClassNotFound, status: 404},
		{name: "404 HTML", handler: answer(404, []byte("<html>nope</html>"), "Content-Type", "text/html"),
			outcome: OutcomeDead, class: ClassNotFound, status: 404, message: "Not Found"},
		{name: "422", handler: answer(422, fixture(t, "webhook", "error_unprocessable.json")),
			outcome: OutcomeDead, class: ClassInvalidRequest, status: 422, message: "YYYY-MM-DD"},
		{name: "429 delay-seconds", handler: answer(429, rl, "Retry-After", "17"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("17"), message: "quota"},
		{name: "429 IMF-fixdate", handler: answer(429, rl, "Retry-After", fixdate),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp(fixdate)},
		{name: "429 without Retry-After", handler: answer(429, rl),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429},
		{name: "429 malformed Retry-After", handler: answer(429, rl, "Retry-After", "soon-ish"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("soon-ish")},
		{name: "429 negative Retry-After", handler: answer(429, rl, "Retry-After", "-5"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("-5")},
		{name: "429 empty Retry-After", handler: answer(429, rl, "Retry-After", ""),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("")},
		{name: "429 two Retry-After fields", handler: answer(429, rl, "Retry-After", "10", "Retry-After", "20"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("10, 20")},
		{name: "429 plain text", handler: answer(429, []byte("slow down"), "Content-Type", "text/plain", "Retry-After", "3"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("3"), message: "slow down"},
		{name: "500", handler: answer(500, fixture(t, "webhook", "error_server_error.json")),
			outcome: OutcomeTransient, class: ClassServerError, status: 500, message: "internal error"},
		{name: "502 HTML", handler: answer(502, []byte("<html>Bad Gateway</html>"), "Content-Type", "text/html"),
			outcome: OutcomeTransient, class: ClassServerError, status: 502},
		{name: "504 no body", handler: answer(504, nil),
			outcome: OutcomeTransient, class: ClassServerError, status: 504},
		{name: "503 with Retry-After", handler: answer(503, fixture(t, "webhook", "error_unavailable.json"), "Retry-After", "30"),
			outcome: OutcomeThrottled, class: ClassUnavailable, status: 503, retryAfter: strp("30"), message: "maintenance"},
		{name: "503 with a date Retry-After", handler: answer(503, fixture(t, "webhook", "error_unavailable.json"), "Retry-After", fixdate),
			outcome: OutcomeThrottled, class: ClassUnavailable, status: 503, retryAfter: strp(fixdate)},
		{name: "503 without Retry-After", handler: answer(503, fixture(t, "webhook", "error_unavailable.json")),
			outcome: OutcomeTransient, class: ClassUnavailable, status: 503},
		{name: "201 not JSON", handler: answer(201, []byte("<html>OK</html>"), "Content-Type", "text/html"),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 201},
		{name: "200 empty", handler: answer(200, nil),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "201 without id", handler: answer(201, []byte(`{"applied_at": "2026-11-29T17:04:06Z"}`)),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 201},
		{name: "201 id of the wrong type", handler: answer(201, []byte(`{"id": 789}`)),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 201},
		{name: "201 too large", handler: answer(201, bytes.Repeat([]byte(" "), MaxResponseBytes+1)),
			outcome: OutcomeTransient, class: ClassResponseTooLarge, status: 201},
		{name: "202 a success the protocol lacks", handler: answer(202, nil),
			outcome: OutcomeTransient, class: ClassUnexpectedStatus, status: 202},
		{name: "302 not followed", handler: answer(302, nil, "Location", "https://elsewhere.example/v1/action-sets"),
			outcome: OutcomeDead, class: ClassUnexpectedRedirect, status: 302},
		{name: "418 a client error the protocol lacks", handler: answer(418, nil),
			outcome: OutcomeDead, class: ClassUnexpectedStatus, status: 418},
		{name: "408", handler: answer(408, nil),
			outcome: OutcomeTransient, class: ClassTimeout, status: 408},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeCRM(t, tt.handler)
			got, err := f.target(t, KindWebhook).Deliver(t.Context(), delivery())
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if got.CRMID != tt.crmID {
				t.Errorf("CRMID = %q, want %q", got.CRMID, tt.crmID)
			}
			if !eqp(got.RetryAfter, tt.retryAfter) {
				t.Errorf("RetryAfter = %s, want %s", show(got.RetryAfter), show(tt.retryAfter))
			}
			if !strings.Contains(got.Message, tt.message) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.message)
			}
			if got.VendorDelay != nil || got.DeferUntil != nil || got.Gauges != nil {
				t.Errorf("webhook has no vendor signals, got %+v", got)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests, want 1 (redirects are not followed, nothing is retried)", n)
			}
			assertNoSecrets(t, "Message", got.Message)
		})
	}
}

// TestWebhookNetworkFailures: resets, timeouts, garbage and refusals are
// transient Results, not errors.
func TestWebhookNetworkFailures(t *testing.T) {
	t.Parallel()
	for _, kind := range Kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			cases := []struct {
				name    string
				handler func(f *fakeCRM) http.HandlerFunc
				class   string
			}{
				{"reset", func(*fakeCRM) http.HandlerFunc { return resetConnection(t) }, ClassNetwork},
				{"garbage", func(*fakeCRM) http.HandlerFunc { return garbage(t) }, ClassNetwork},
				{"reset mid body", func(*fakeCRM) http.HandlerFunc { return resetMidBody(t) }, ClassNetwork},
				{"timeout", func(f *fakeCRM) http.HandlerFunc { return f.block }, ClassTimeout},
			}
			for _, c := range cases {
				f := newFakeCRM(t)
				f.handlers = []http.HandlerFunc{c.handler(f)}
				cfg := f.config(kind)
				cfg.Timeout = shortTimeout
				tg, err := New(cfg)
				mustNoErr(t, err)
				got, err := tg.Deliver(t.Context(), delivery())
				mustNoErr(t, err)
				if got.Outcome != OutcomeTransient || got.Class != c.class {
					t.Errorf("%s: got %q %q (%q), want transient %q", c.name, got.Outcome, got.Class, got.Message, c.class)
				}
				if c.name == "reset mid body" && got.HTTPStatus != 201 {
					t.Errorf("%s: HTTPStatus = %d, want 201 (the status arrived)", c.name, got.HTTPStatus)
				}
				if got.Message == "" {
					t.Errorf("%s: no Message", c.name)
				}
				assertNoSecrets(t, "Message", got.Message)
				if n := len(f.requests()); n != 1 {
					t.Errorf("%s: %d requests, want 1: delivery stops at the first failure", c.name, n)
				}
			}

			// Nothing listens.
			f := newFakeCRM(t, answer(201, nil))
			cfg := f.config(kind)
			f.srv.Close()
			tg, err := New(cfg)
			mustNoErr(t, err)
			got, err := tg.Deliver(t.Context(), delivery())
			mustNoErr(t, err)
			checkOutcome(t, got, OutcomeTransient, ClassNetwork, 0)

			// The caller's deadline, and the caller's cancellation.
			f = newFakeCRM(t)
			f.handlers = []http.HandlerFunc{f.block}
			tg = f.target(t, kind)
			ctx, cancel := context.WithTimeout(t.Context(), shortTimeout)
			defer cancel()
			got, err = tg.Deliver(ctx, delivery())
			mustNoErr(t, err)
			checkOutcome(t, got, OutcomeTransient, ClassTimeout, 0)
			ctx, cancel = context.WithCancel(t.Context())
			cancel()
			got, err = tg.Deliver(ctx, delivery())
			mustNoErr(t, err)
			checkOutcome(t, got, OutcomeTransient, ClassCanceled, 0)
		})
	}
}

// TestWebhookDeliveryAttempt: X-Delivery-Attempt counts the attempts the
// dispatcher makes; the key and the body stay the same.
func TestWebhookDeliveryAttempt(t *testing.T) {
	t.Parallel()
	f := newFakeCRM(t, answer(503, nil), answer(503, nil), answer(201, fixture(t, "webhook", "created.json")))
	tg := f.target(t, KindWebhook)
	for attempt := 1; attempt <= 3; attempt++ {
		_, err := tg.Deliver(t.Context(), Delivery{Set: fixedSet(), Attempt: attempt})
		mustNoErr(t, err)
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Get("X-Delivery-Attempt"); got != strconv.Itoa(i+1) {
			t.Errorf("request %d: X-Delivery-Attempt = %q, want %d", i, got, i+1)
		}
		if r.Header.Get("Idempotency-Key") != "t1:call-42:1" || !bytes.Equal(r.Body, reqs[0].Body) {
			t.Errorf("request %d: the key or the body changed between attempts", i)
		}
	}
}

// TestInvalidDelivery: a delivery that breaks the protocol is an error,
// for every kind, and nothing is sent.
func TestInvalidDelivery(t *testing.T) {
	t.Parallel()
	mutate := map[string]func(d *Delivery){
		"attempt 0":         func(d *Delivery) { d.Attempt = 0 },
		"no tenant":         func(d *Delivery) { d.Set.TenantID = "" },
		"no call":           func(d *Delivery) { d.Set.CallID = "" },
		"version 0":         func(d *Delivery) { d.Set.ActionVersion = 0 },
		"no committed_at":   func(d *Delivery) { d.Set.CommittedAt = time.Time{} },
		"no actions":        func(d *Delivery) { d.Set.Actions = nil },
		"no call_note":      func(d *Delivery) { d.Set.Actions = d.Set.Actions[1:] },
		"two call_notes":    func(d *Delivery) { d.Set.Actions = append(d.Set.Actions, d.Set.Actions[0]) },
		"unknown kind":      func(d *Delivery) { d.Set.Actions[3].Kind = "send_flowers" },
		"bad due":           func(d *Delivery) { d.Set.Actions[1].Due = "12/01/2026" },
		"bad date":          func(d *Delivery) { d.Set.Actions[3].Date = "2026-12-4" },
		"no window":         func(d *Delivery) { d.Set.Actions[2].Window = nil },
		"no shipment":       func(d *Delivery) { d.Set.Actions[2].ShipmentRef = "" },
		"window backwards":  func(d *Delivery) { w := d.Set.Actions[2].Window; w.Start, w.End = w.End, w.Start },
		"empty window ends": func(d *Delivery) { d.Set.Actions[2].Window = &crm.Window{} },
	}
	for _, kind := range Kinds() {
		f := newFakeCRM(t, answer(201, fixture(t, "webhook", "created.json")))
		tg := f.target(t, kind)
		for name, m := range mutate {
			d := delivery()
			m(&d)
			_, err := tg.Deliver(t.Context(), d)
			if !errors.Is(err, ErrInvalidDelivery) {
				t.Errorf("%s, %s: err = %v, want ErrInvalidDelivery", kind, name, err)
			}
		}
		if n := len(f.requests()); n != 0 {
			t.Errorf("%s: %d requests sent for invalid deliveries", kind, n)
		}
	}
}

// TestWebhookKeepsConnectionsAlive: a target without an HTTPClient keeps
// a connection per concurrent delivery for the next ones (a process's CRM
// workers deliver to one host at once); http.DefaultTransport would keep 2
// and open 18 new ones for each wave of 20.
func TestWebhookKeepsConnectionsAlive(t *testing.T) {
	t.Parallel()
	const width, waves = 20, 10
	srv := conntest.Start(t, width, answer(201, fixture(t, "webhook", "created.json")))
	tg, err := New(Config{Kind: KindWebhook, BaseURL: srv.URL, Token: testToken})
	mustNoErr(t, err)
	got := srv.Waves(t, waves, func(ctx context.Context, _ int) error {
		res, err := tg.Deliver(ctx, delivery())
		if err == nil && res.Outcome != OutcomeApplied {
			err = fmt.Errorf("outcome %s (%s), want applied", res.Outcome, res.Class)
		}
		return err
	})
	if got > 3*width || srv.ShortWaves() > 0 {
		t.Errorf("%d waves of %d concurrent deliveries opened %d connections, want at most %d (%v)", waves, width, got, 3*width, srv)
	}
}
