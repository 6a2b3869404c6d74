package connector

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/crm"
)

const (
	hsNotes = "/crm/v3/objects/notes/batch/upsert"
	hsTasks = "/crm/v3/objects/tasks/batch/upsert"
)

// hubspotFake answers notes and tasks batches with their own handlers.
func hubspotFake(t *testing.T, notes, tasks http.HandlerFunc) *fakeCRM {
	t.Helper()
	f := newFakeCRM(t, answer(404, nil))
	f.byPath = map[string]http.HandlerFunc{hsNotes: notes, hsTasks: tasks}
	return f
}

// TestHubSpotRequests checks the request side: the note and the tasks, by
// unique property, with HubSpot's property names and timestamps.
func TestHubSpotRequests(t *testing.T) {
	t.Parallel()
	f := hubspotFake(t,
		answer(200, fixture(t, "hubspot", "notes_upsert_new.json")),
		answer(200, fixture(t, "hubspot", "tasks_upsert_new.json")))
	d := delivery()
	d.Set.Actions[0].Text = "Caller said <rates> & \"terms\""
	got, err := f.target(t, KindHubSpot).Deliver(t.Context(), d)
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeApplied, ClassApplied, 200)
	// HubSpot returned the tasks out of order: CRMID is in action order.
	if got.CRMID != "61822911187,61822911301,61822911302,61822911303" {
		t.Errorf("CRMID = %q", got.CRMID)
	}

	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].Path != hsNotes || reqs[1].Path != hsTasks {
		t.Fatalf("requests %+v, want notes then tasks", reqs)
	}
	want := []hubspotUpsertBody{
		{Inputs: []hubspotUpsertInput{
			{IDProperty: "callscribe_key", ID: "t1:call-42:1:0", Properties: map[string]string{
				"hs_note_body": "Caller said &lt;rates&gt; &amp; &#34;terms&#34;",
				"hs_timestamp": "2026-11-29T17:04:05.000Z",
			}},
		}},
		{Inputs: []hubspotUpsertInput{
			{IDProperty: "callscribe_key", ID: "t1:call-42:1:1", Properties: map[string]string{
				"hs_task_subject": "Send rate sheet: Chicago to Dallas",
				"hs_task_body":    "Rate sheet promised on call call-42 for Chicago to Dallas, due 2026-12-01.",
				"hs_task_status":  "NOT_STARTED",
				"hs_timestamp":    "2026-12-01T05:00:00.000Z", // midnight in New York
			}},
			{IDProperty: "callscribe_key", ID: "t1:call-42:1:2", Properties: map[string]string{
				"hs_task_subject": "Pickup window change: PO-5512",
				"hs_task_body":    "New pickup window for PO-5512: 2026-12-02T08:00:00-06:00 to 2026-12-02T12:00:00-06:00 (call call-42).",
				"hs_task_status":  "NOT_STARTED",
				"hs_timestamp":    "2026-12-02T14:00:00.000Z", // the window's start
			}},
			{IDProperty: "callscribe_key", ID: "t1:call-42:1:3", Properties: map[string]string{
				"hs_task_subject": "Next call on 2026-12-04",
				"hs_task_body":    "Next call agreed on call call-42 for 2026-12-04.",
				"hs_task_status":  "NOT_STARTED",
				"hs_timestamp":    "2026-12-04T05:00:00.000Z",
			}},
		}},
	}
	for i, r := range reqs {
		if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+testToken {
			t.Errorf("request %d: %s with Authorization %q", i, r.Method, r.Header.Get("Authorization"))
		}
		var body hubspotUpsertBody
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !jsonEqual(t, body, want[i]) {
			t.Errorf("request %d body\n got %s\nwant %s", i, r.Body, mustJSON(t, want[i]))
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonEqual(t testing.TB, a, b any) bool {
	t.Helper()
	return string(mustJSON(t, a)) == string(mustJSON(t, b))
}

// TestHubSpotOnlyANote: a set with only its call_note makes one request.
func TestHubSpotOnlyANote(t *testing.T) {
	t.Parallel()
	f := hubspotFake(t, answer(200, fixture(t, "hubspot", "notes_upsert_existing.json")), answer(500, nil))
	d := delivery()
	d.Set.Actions = d.Set.Actions[:1]
	got, err := f.target(t, KindHubSpot).Deliver(t.Context(), d)
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeReplayed, ClassReplayed, 200)
	if n := len(f.requests()); n != 1 || got.CRMID != "61822911187" {
		t.Errorf("%d requests, CRMID %q", n, got.CRMID)
	}
}

// TestHubSpotResponseTable drives Deliver through HubSpot's answers.
func TestHubSpotResponseTable(t *testing.T) {
	t.Parallel()
	notesNew := answer(200, fixture(t, "hubspot", "notes_upsert_new.json"))
	notesOld := answer(200, fixture(t, "hubspot", "notes_upsert_existing.json"))
	tasksNew := answer(200, fixture(t, "hubspot", "tasks_upsert_new.json"))
	tasksOld := answer(200, fixture(t, "hubspot", "tasks_upsert_existing.json"))
	rateHeaders := []string{
		"X-HubSpot-RateLimit-Interval-Milliseconds", "10000", "X-HubSpot-RateLimit-Max", "100",
		"X-HubSpot-RateLimit-Remaining", "0", "X-HubSpot-RateLimit-Daily", "250000",
		"X-HubSpot-RateLimit-Daily-Remaining", "12345",
	}
	ten := 10 * time.Second
	tests := []struct {
		name        string
		notes       http.HandlerFunc
		tasks       http.HandlerFunc
		outcome     Outcome
		class       string
		status      int
		crmID       string
		retryAfter  *string
		vendorDelay *time.Duration
		delayRaw    string
		message     string
		gauges      map[string]float64
	}{
		{name: "all new", notes: notesNew, tasks: tasksNew,
			outcome: OutcomeApplied, class: ClassApplied, status: 200, crmID: "61822911187,61822911301,61822911302,61822911303"},
		{name: "all existing", notes: notesOld, tasks: tasksOld,
			outcome: OutcomeReplayed, class: ClassReplayed, status: 200, crmID: "61822911187,61822911301,61822911302,61822911303"},
		{name: "note existing, tasks new", notes: notesOld, tasks: tasksNew,
			outcome: OutcomeApplied, class: ClassApplied, status: 200, crmID: "61822911187,61822911301,61822911302,61822911303"},
		{name: "gauges", notes: notesOld, tasks: answer(200, fixture(t, "hubspot", "tasks_upsert_existing.json"), rateHeaders...),
			outcome: OutcomeReplayed, class: ClassReplayed, status: 200, crmID: "61822911187,61822911301,61822911302,61822911303",
			gauges: map[string]float64{"hubspot_ratelimit_max": 100, "hubspot_ratelimit_remaining": 0, "hubspot_ratelimit_daily": 250000, "hubspot_ratelimit_daily_remaining": 12345}},
		{name: "207 partial failure", notes: notesNew, tasks: answer(207, fixture(t, "hubspot", "tasks_upsert_multi_status.json")),
			outcome: OutcomeDead, class: ClassPartialFailure, status: 207, crmID: "61822911187,61822911301",
			message: "tasks batch: 2 of 3 inputs failed: VALIDATION_ERROR: Property values were not valid"},
		{name: "400 validation", notes: answer(400, fixture(t, "hubspot", "error_validation.json")), tasks: tasksNew,
			outcome: OutcomeDead, class: ClassInvalidRequest, status: 400,
			message: `notes batch: VALIDATION_ERROR: Property "callscribe_key" does not exist (correlationId aeb5f871`},
		{name: "401", notes: answer(401, fixture(t, "hubspot", "error_unauthorized.json")), tasks: tasksNew,
			outcome: OutcomeDead, class: ClassUnauthorized, status: 401, message: "INVALID_AUTHENTICATION"},
		{name: "403 missing scopes on the tasks", notes: notesNew, tasks: answer(403, fixture(t, "hubspot", "error_missing_scopes.json")),
			outcome: OutcomeDead, class: ClassForbidden, status: 403, crmID: "61822911187", message: "tasks batch: MISSING_SCOPES"},
		{name: "404", notes: answer(404, fixture(t, "hubspot", "error_not_found.json")), tasks: tasksNew,
			outcome: OutcomeDead, class: ClassNotFound, status: 404, message: "OBJECT_NOT_FOUND"},
		{name: "409", notes: answer(409, fixture(t, "hubspot", "error_conflict.json")), tasks: tasksNew,
			outcome: OutcomeDead, class: ClassConflict, status: 409, message: "Duplicate IDs"},
		{name: "429 TEN_SECONDLY_ROLLING", notes: answer(429, fixture(t, "hubspot", "error_rate_limit_ten_secondly.json"), rateHeaders...), tasks: tasksNew,
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, vendorDelay: &ten, delayRaw: "10000",
			message: "ten_secondly_rolling", gauges: map[string]float64{"hubspot_ratelimit_max": 100, "hubspot_ratelimit_remaining": 0, "hubspot_ratelimit_daily": 250000, "hubspot_ratelimit_daily_remaining": 12345}},
		{name: "429 SECONDLY", notes: notesNew, tasks: answer(429, fixture(t, "hubspot", "error_rate_limit_secondly.json"), "X-HubSpot-RateLimit-Interval-Milliseconds", "1000"),
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, crmID: "61822911187", vendorDelay: durp(time.Second), delayRaw: "1000"},
		{name: "429 with Retry-After and no body", notes: answer(429, nil, "Retry-After", "3"), tasks: tasksNew,
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, retryAfter: strp("3")},
		{name: "429 with a malformed interval", notes: answer(429, fixture(t, "hubspot", "error_rate_limit_ten_secondly.json"), "X-HubSpot-RateLimit-Interval-Milliseconds", "ten seconds"), tasks: tasksNew,
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, delayRaw: "ten seconds"},
		{name: "500", notes: answer(500, fixture(t, "hubspot", "error_server.json")), tasks: tasksNew,
			outcome: OutcomeTransient, class: ClassServerError, status: 500, message: "internal error"},
		{name: "502 HTML", notes: notesNew, tasks: answer(502, []byte("<html>bad gateway</html>"), "Content-Type", "text/html"),
			outcome: OutcomeTransient, class: ClassServerError, status: 502, crmID: "61822911187"},
		{name: "503 with Retry-After", notes: answer(503, nil, "Retry-After", "60"), tasks: tasksNew,
			outcome: OutcomeThrottled, class: ClassUnavailable, status: 503, retryAfter: strp("60")},
		{name: "200 not JSON", notes: answer(200, []byte("<html/>"), "Content-Type", "text/html"), tasks: tasksNew,
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200},
		{name: "200 missing results", notes: notesNew, tasks: answer(200, []byte(`{"status": "COMPLETE", "results": []}`)),
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200, crmID: "61822911187", message: "0 results for 3 inputs"},
		{name: "200 not complete", notes: answer(200, []byte(`{"status": "PROCESSING", "results": []}`)), tasks: tasksNew,
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200, message: "PROCESSING"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := hubspotFake(t, tt.notes, tt.tasks)
			got, err := f.target(t, KindHubSpot).Deliver(t.Context(), delivery())
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if got.CRMID != tt.crmID {
				t.Errorf("CRMID = %q, want %q", got.CRMID, tt.crmID)
			}
			if !eqp(got.RetryAfter, tt.retryAfter) {
				t.Errorf("RetryAfter = %s, want %s", show(got.RetryAfter), show(tt.retryAfter))
			}
			if (got.VendorDelay == nil) != (tt.vendorDelay == nil) || (got.VendorDelay != nil && *got.VendorDelay != *tt.vendorDelay) {
				t.Errorf("VendorDelay = %v, want %v", got.VendorDelay, tt.vendorDelay)
			}
			if got.VendorDelayRaw != tt.delayRaw || (tt.delayRaw != "") != (got.VendorDelayHeader == "X-HubSpot-RateLimit-Interval-Milliseconds") {
				t.Errorf("VendorDelayHeader %q, VendorDelayRaw %q, want raw %q", got.VendorDelayHeader, got.VendorDelayRaw, tt.delayRaw)
			}
			if got.DeferUntil != nil {
				t.Errorf("DeferUntil = %v, want none", got.DeferUntil)
			}
			if !strings.Contains(got.Message, tt.message) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.message)
			}
			if len(got.Gauges) != len(tt.gauges) {
				t.Errorf("Gauges = %v, want %v", got.Gauges, tt.gauges)
			}
			for k, v := range tt.gauges {
				if got.Gauges[k] != v {
					t.Errorf("Gauges[%s] = %v, want %v", k, got.Gauges[k], v)
				}
			}
			assertNoSecrets(t, "Message", got.Message)
		})
	}
}

func durp(d time.Duration) *time.Duration { return &d }

// TestHubSpotDailyLimit: a DAILY 429 defers until the next midnight in the
// account's time zone, across daylight saving changes.
func TestHubSpotDailyLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		zone string
		now  time.Time
		want time.Time
	}{
		// 23:30 EST on March 7: the next midnight is 00:00 EST on March 8 (DST starts at 02:00).
		{"", time.Date(2026, 3, 8, 4, 30, 0, 0, time.UTC), time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC)},
		// 00:30 EDT on November 1: the next midnight is 00:00 EST on November 2 (25 hours later).
		{"America/New_York", time.Date(2026, 11, 1, 4, 30, 0, 0, time.UTC), time.Date(2026, 11, 2, 5, 0, 0, 0, time.UTC)},
		// Exactly midnight: the next one, a day later.
		{"America/New_York", time.Date(2026, 6, 1, 4, 0, 0, 0, time.UTC), time.Date(2026, 6, 2, 4, 0, 0, 0, time.UTC)},
		{"Europe/Berlin", time.Date(2026, 6, 1, 21, 59, 0, 0, time.UTC), time.Date(2026, 6, 1, 22, 0, 0, 0, time.UTC)},
		{"UTC", time.Date(2026, 6, 1, 21, 59, 0, 0, time.UTC), time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		f := hubspotFake(t, answer(429, fixture(t, "hubspot", "error_rate_limit_daily.json"),
			"X-HubSpot-RateLimit-Interval-Milliseconds", "10000", "X-HubSpot-RateLimit-Daily-Remaining", "0"), answer(500, nil))
		cfg := f.config(KindHubSpot)
		cfg.TimeZone = tt.zone
		cfg.Clock = clock.NewStub(tt.now)
		tg, err := New(cfg)
		mustNoErr(t, err)
		got, err := tg.Deliver(t.Context(), delivery())
		mustNoErr(t, err)
		checkOutcome(t, got, OutcomeThrottled, ClassDailyLimitExceeded, 429)
		if got.DeferUntil == nil || !got.DeferUntil.Equal(tt.want) {
			t.Errorf("%s at %v: DeferUntil = %v, want %v", tt.zone, tt.now, got.DeferUntil, tt.want)
		}
		zone := tt.zone
		if zone == "" {
			zone = HubSpotTimeZoneDefault
		}
		if got.DeferReason != "hubspot DAILY limit: resets at midnight "+zone {
			t.Errorf("DeferReason = %q", got.DeferReason)
		}
		if got.VendorDelay != nil || got.VendorDelayHeader != "" {
			t.Errorf("a DAILY limit reports no ten-second window, got %v %q", got.VendorDelay, got.VendorDelayHeader)
		}
		if got.Gauges["hubspot_ratelimit_daily_remaining"] != 0 || len(got.Gauges) != 1 {
			t.Errorf("Gauges = %v", got.Gauges)
		}
		if !strings.Contains(got.Message, "daily limit") {
			t.Errorf("Message = %q", got.Message)
		}
	}
}

func TestHubSpotConfig(t *testing.T) {
	t.Parallel()
	f := hubspotFake(t, answer(200, fixture(t, "hubspot", "notes_upsert_new.json")), answer(200, fixture(t, "hubspot", "tasks_upsert_new.json")))
	cfg := f.config(KindHubSpot)
	cfg.IDProperty, cfg.TimeZone = "call_key", "Europe/Berlin"
	tg, err := New(cfg)
	mustNoErr(t, err)
	d := delivery()
	d.Set.Actions = []crm.Action{d.Set.Actions[0], d.Set.Actions[3]}
	_, err = tg.Deliver(t.Context(), d)
	mustNoErr(t, err)
	var body hubspotUpsertBody
	_ = json.Unmarshal(f.requests()[1].Body, &body)
	in := body.Inputs[0]
	if in.IDProperty != "call_key" || in.Properties["hs_timestamp"] != "2026-12-03T23:00:00.000Z" {
		t.Errorf("input %+v", in)
	}

	// The default base URL, and refusals naming the field.
	if _, err := New(Config{Kind: KindHubSpot, Token: testToken}); err != nil {
		t.Errorf("hubspot without BaseURL: %v", err)
	}
	for _, bad := range []Config{{TimeZone: "Mars/Olympus"}, {TimeZone: "Local"}, {IDProperty: "bad name"}} {
		bad.Kind, bad.Token = KindHubSpot, testToken
		if _, err := New(bad); err == nil || !strings.Contains(err.Error(), "Config.") {
			t.Errorf("New(%v) = %v, want an error naming the field", bad, err)
		}
	}
}
