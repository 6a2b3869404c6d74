package connector

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/crm"
)

// sfPath is the upsert path of action i of the fixed set.
func sfPath(i string) string {
	return "/services/data/v59.0/sobjects/Task/Callscribe_Key__c/t1:call-42:1:" + i
}

// TestSalesforceRequests checks the request side: one PATCH per action, by
// external id, with the mapped Task fields and nothing else in the body.
func TestSalesforceRequests(t *testing.T) {
	t.Parallel()
	f := newFakeCRM(t, answer(201, fixture(t, "salesforce", "upsert_created.json"), "Sforce-Limit-Info", "api-usage=25/15000"))
	got, err := f.target(t, KindSalesforce).Deliver(t.Context(), delivery())
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeApplied, ClassApplied, 201)

	want := []struct {
		path string
		body salesforceRecord
	}{
		{sfPath("0"), salesforceRecord{Subject: "Call summary: call call-42", Description: fixedSet().Actions[0].Text, ActivityDate: "2026-11-29"}},
		{sfPath("1"), salesforceRecord{Subject: "Send rate sheet: Chicago to Dallas", Description: "Rate sheet promised on call call-42 for Chicago to Dallas, due 2026-12-01.", ActivityDate: "2026-12-01"}},
		{sfPath("2"), salesforceRecord{Subject: "Pickup window change: PO-5512", Description: "New pickup window for PO-5512: 2026-12-02T08:00:00-06:00 to 2026-12-02T12:00:00-06:00 (call call-42).", ActivityDate: "2026-12-02"}},
		{sfPath("3"), salesforceRecord{Subject: "Next call on 2026-12-04", Description: "Next call agreed on call call-42 for 2026-12-04.", ActivityDate: "2026-12-04"}},
	}
	reqs := f.requests()
	if len(reqs) != len(want) {
		t.Fatalf("%d requests, want %d", len(reqs), len(want))
	}
	for i, r := range reqs {
		if r.Method != http.MethodPatch || r.Path != want[i].path {
			t.Errorf("request %d: %s %s, want PATCH %s", i, r.Method, r.Path, want[i].path)
		}
		if a := r.Header.Get("Authorization"); a != "Bearer "+testToken {
			t.Errorf("request %d: Authorization = %q", i, a)
		}
		if r.Header.Get("Idempotency-Key") != "" || r.Header.Get("X-Delivery-Attempt") != "" {
			t.Errorf("request %d: webhook headers sent to Salesforce", i)
		}
		var fields map[string]any
		if err := json.Unmarshal(r.Body, &fields); err != nil || len(fields) != 3 {
			t.Errorf("request %d: body %s, want exactly Subject, Description, ActivityDate", i, r.Body)
		}
		var body salesforceRecord
		if err := json.Unmarshal(r.Body, &body); err != nil || body != want[i].body {
			t.Errorf("request %d: body %+v, want %+v", i, body, want[i].body)
		}
	}
	if got.CRMID != strings.Repeat("00T5g00000AbCdEEAZ,", 3)+"00T5g00000AbCdEEAZ" {
		t.Errorf("CRMID = %q", got.CRMID)
	}
	if got.Gauges["salesforce_api_usage"] != 25 || got.Gauges["salesforce_api_limit"] != 15000 || len(got.Gauges) != 2 {
		t.Errorf("Gauges = %v", got.Gauges)
	}
}

// TestSalesforceConfig: the API version, object and field are configurable,
// and ids that cannot be readable are hashed.
func TestSalesforceConfig(t *testing.T) {
	t.Parallel()
	f := newFakeCRM(t, answer(204, nil))
	cfg := f.config(KindSalesforce)
	cfg.APIVersion, cfg.SObject, cfg.ExternalIDField = "v45.0", "Call_Followup__c", "Key__c"
	tg, err := New(cfg)
	mustNoErr(t, err)
	d := delivery()
	d.Set.TenantID = "Tenant/One" // upper case and a slash: hashed
	got, err := tg.Deliver(t.Context(), d)
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeReplayed, ClassReplayed, 204)
	if got.CRMID != "" {
		t.Errorf("CRMID = %q, want none (204 has no body)", got.CRMID)
	}
	for i, r := range f.requests() {
		want := "/services/data/v45.0/sobjects/Call_Followup__c/Key__c/" + ExternalID(d.Set, i)
		if r.Path != want || !strings.Contains(r.Path, "/cs1_") {
			t.Errorf("request %d: path %s, want %s", i, r.Path, want)
		}
	}
	for _, bad := range []Config{
		{APIVersion: "59.0"}, {APIVersion: "v59"}, {SObject: "Task/../x"}, {ExternalIDField: "a b"},
	} {
		bad.Kind, bad.BaseURL, bad.Token = KindSalesforce, "https://example.my.salesforce.com", testToken
		if _, err := New(bad); err == nil || !strings.Contains(err.Error(), "Config.") {
			t.Errorf("New(%v) = %v, want an error naming the field", bad, err)
		}
	}
}

// TestSalesforceResponseTable drives Deliver through the upsert answers:
// each case lists the answers of successive records.
func TestSalesforceResponseTable(t *testing.T) {
	t.Parallel()
	created := answer(201, fixture(t, "salesforce", "upsert_created.json"))
	updated := answer(200, fixture(t, "salesforce", "upsert_updated.json"))
	tests := []struct {
		name       string
		handlers   []http.HandlerFunc
		outcome    Outcome
		class      string
		status     int
		requests   int
		crmID      string
		retryAfter *string
		message    string
	}{
		{name: "all created", handlers: []http.HandlerFunc{created},
			outcome: OutcomeApplied, class: ClassApplied, status: 201, requests: 4, crmID: "00T5g00000AbCdEEAZ,00T5g00000AbCdEEAZ,00T5g00000AbCdEEAZ,00T5g00000AbCdEEAZ"},
		{name: "all updated (v46+)", handlers: []http.HandlerFunc{updated},
			outcome: OutcomeReplayed, class: ClassReplayed, status: 200, requests: 4, crmID: "00T5g00000AbCdEEAZ,00T5g00000AbCdEEAZ,00T5g00000AbCdEEAZ,00T5g00000AbCdEEAZ"},
		{name: "one created among updates", handlers: []http.HandlerFunc{updated, updated, created, updated},
			outcome: OutcomeApplied, class: ClassApplied, status: 200, requests: 4, crmID: "00T5g00000AbCdEEAZ,00T5g00000AbCdEEAZ,00T5g00000AbCdEEAZ,00T5g00000AbCdEEAZ"},
		{name: "all updated (204, before v46)", handlers: []http.HandlerFunc{answer(204, nil)},
			outcome: OutcomeReplayed, class: ClassReplayed, status: 204, requests: 4},
		{name: "created before v46 (no created field)", handlers: []http.HandlerFunc{answer(201, fixture(t, "salesforce", "upsert_created_v45.json")), answer(204, nil)},
			outcome: OutcomeApplied, class: ClassApplied, status: 204, requests: 4, crmID: "00T5g00000AbCdEEAZ"},
		{name: "300 multiple matches", handlers: []http.HandlerFunc{created, answer(300, fixture(t, "salesforce", "multiple_matches.json"))},
			outcome: OutcomeDead, class: ClassMultipleMatches, status: 300, requests: 2, crmID: "00T5g00000AbCdEEAZ", message: "record 2 of 4: the external id matches several records: /services"},
		{name: "400 invalid field", handlers: []http.HandlerFunc{answer(400, fixture(t, "salesforce", "error_invalid_field.json"))},
			outcome: OutcomeDead, class: ClassInvalidRequest, status: 400, requests: 1, message: "record 1 of 4: INVALID_FIELD: No such column"},
		{name: "400 duplicate value (concurrent upsert)", handlers: []http.HandlerFunc{answer(400, fixture(t, "salesforce", "error_duplicate_value.json"))},
			outcome: OutcomeTransient, class: ClassDuplicateValue, status: 400, requests: 1, message: "DUPLICATE_VALUE"},
		{name: "401 invalid session", handlers: []http.HandlerFunc{answer(401, fixture(t, "salesforce", "error_invalid_session.json"))},
			outcome: OutcomeDead, class: ClassUnauthorized, status: 401, requests: 1, message: "INVALID_SESSION_ID: Session expired or invalid"},
		{name: "403 request limit exceeded", handlers: []http.HandlerFunc{created, created, answer(403, fixture(t, "salesforce", "error_request_limit_exceeded.json"), "Sforce-Limit-Info", "api-usage=15001/15000")},
			outcome: OutcomeThrottled, class: ClassRequestLimitExceeded, status: 403, requests: 3, crmID: "00T5g00000AbCdEEAZ,00T5g00000AbCdEEAZ", message: "record 3 of 4: REQUEST_LIMIT_EXCEEDED: TotalRequests Limit exceeded."},
		{name: "403 other", handlers: []http.HandlerFunc{answer(403, fixture(t, "salesforce", "error_api_disabled.json"))},
			outcome: OutcomeDead, class: ClassForbidden, status: 403, requests: 1, message: "API_DISABLED_FOR_ORG"},
		{name: "404 (object form)", handlers: []http.HandlerFunc{answer(404, fixture(t, "salesforce", "error_not_found.json"))},
			outcome: OutcomeDead, class: ClassNotFound, status: 404, requests: 1, message: "NOT_FOUND: The requested resource does not exist"},
		{name: "500", handlers: []http.HandlerFunc{answer(500, fixture(t, "salesforce", "error_server.json"))},
			outcome: OutcomeTransient, class: ClassServerError, status: 500, requests: 1, message: "UNKNOWN_EXCEPTION"},
		{name: "503 with Retry-After", handlers: []http.HandlerFunc{answer(503, []byte("<html>maintenance</html>"), "Content-Type", "text/html", "Retry-After", "120")},
			outcome: OutcomeThrottled, class: ClassUnavailable, status: 503, requests: 1, retryAfter: strp("120")},
		{name: "503 without Retry-After", handlers: []http.HandlerFunc{answer(503, nil)},
			outcome: OutcomeTransient, class: ClassUnavailable, status: 503, requests: 1},
		{name: "429 (not documented, still throttling)", handlers: []http.HandlerFunc{answer(429, nil, "Retry-After", "5")},
			outcome: OutcomeThrottled, class: ClassRateLimited, status: 429, requests: 1, retryAfter: strp("5")},
		{name: "200 not JSON", handlers: []http.HandlerFunc{answer(200, []byte("OK"), "Content-Type", "text/plain")},
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200, requests: 1},
		{name: "201 success false", handlers: []http.HandlerFunc{answer(201, []byte(`{"id": "00T1", "success": false, "errors": [{"message": "x"}]}`))},
			outcome: OutcomeTransient, class: ClassBadResponse, status: 201, requests: 1},
		{name: "200 without id", handlers: []http.HandlerFunc{answer(200, []byte(`{"success": true, "errors": [], "created": false}`))},
			outcome: OutcomeTransient, class: ClassBadResponse, status: 200, requests: 1},
		{name: "301 not followed", handlers: []http.HandlerFunc{answer(301, nil, "Location", "https://other.my.salesforce.com/")},
			outcome: OutcomeDead, class: ClassUnexpectedRedirect, status: 301, requests: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeCRM(t, tt.handlers...)
			got, err := f.target(t, KindSalesforce).Deliver(t.Context(), delivery())
			mustNoErr(t, err)
			checkOutcome(t, got, tt.outcome, tt.class, tt.status)
			if n := len(f.requests()); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
			if got.CRMID != tt.crmID {
				t.Errorf("CRMID = %q, want %q", got.CRMID, tt.crmID)
			}
			if !eqp(got.RetryAfter, tt.retryAfter) {
				t.Errorf("RetryAfter = %s, want %s", show(got.RetryAfter), show(tt.retryAfter))
			}
			if !strings.Contains(got.Message, tt.message) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.message)
			}
			if got.VendorDelay != nil || got.DeferUntil != nil {
				t.Errorf("salesforce reports no vendor delay or deadline, got %+v", got)
			}
			assertNoSecrets(t, "Message", got.Message)
		})
	}
}

// TestSalesforceStopsAtFirstFailureThenRetries: the records upserted before
// a failure stay; the retry upserts them again by the same external ids and
// the set is applied once the last record is created.
func TestSalesforceStopsAtFirstFailureThenRetries(t *testing.T) {
	t.Parallel()
	created := answer(201, fixture(t, "salesforce", "upsert_created.json"))
	updated := answer(200, fixture(t, "salesforce", "upsert_updated.json"))
	f := newFakeCRM(t, created, answer(500, fixture(t, "salesforce", "error_server.json")), updated, created)
	tg := f.target(t, KindSalesforce)
	got, err := tg.Deliver(t.Context(), delivery())
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeTransient, ClassServerError, 500)
	got, err = tg.Deliver(t.Context(), Delivery{Set: fixedSet(), Attempt: 2})
	mustNoErr(t, err)
	checkOutcome(t, got, OutcomeApplied, ClassApplied, 201)
	reqs := f.requests()
	paths := []string{sfPath("0"), sfPath("1"), sfPath("0"), sfPath("1"), sfPath("2"), sfPath("3")}
	if len(reqs) != len(paths) {
		t.Fatalf("%d requests, want %d", len(reqs), len(paths))
	}
	for i, r := range reqs {
		if r.Path != paths[i] {
			t.Errorf("request %d: %s, want %s", i, r.Path, paths[i])
		}
	}
}

func TestSalesforceGauges(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]map[string]float64{
		"api-usage=25/15000": {"salesforce_api_usage": 25, "salesforce_api_limit": 15000},
		"api-usage=25/15000, per-app-api-usage=17/250(appName=sample-connected-app)": {
			"salesforce_api_usage": 25, "salesforce_api_limit": 15000,
			"salesforce_per_app_api_usage": 17, "salesforce_per_app_api_limit": 250,
		},
		"api-usage=lots/15000": nil,
		"api-usage=25":         nil,
		"something-else=1/2":   nil,
		"":                     nil,
	} {
		h := http.Header{}
		if raw != "" {
			h.Set("Sforce-Limit-Info", raw)
		}
		got := salesforceGauges(h)
		if len(got) != len(want) {
			t.Errorf("%q: %v, want %v", raw, got, want)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%q: %s = %v, want %v", raw, k, got[k], v)
			}
		}
	}
}

// TestSalesforceLongFields: Subject and Description are cut to Salesforce's
// limits, by characters.
func TestSalesforceLongFields(t *testing.T) {
	t.Parallel()
	f := newFakeCRM(t, answer(201, fixture(t, "salesforce", "upsert_created.json")))
	d := delivery()
	d.Set.Actions = []crm.Action{{Kind: crm.KindCallNote, Text: strings.Repeat("é", 40000)}, {Kind: crm.KindRateSheetPromised, Lanes: []string{strings.Repeat("ü", 300)}, Due: "2026-12-01"}}
	_, err := f.target(t, KindSalesforce).Deliver(t.Context(), d)
	mustNoErr(t, err)
	reqs := f.requests()
	var note, task salesforceRecord
	_ = json.Unmarshal(reqs[0].Body, &note)
	_ = json.Unmarshal(reqs[1].Body, &task)
	if n := len([]rune(note.Description)); n != descriptionMaxRunes {
		t.Errorf("Description has %d characters, want %d", n, descriptionMaxRunes)
	}
	if n := len([]rune(task.Subject)); n != subjectMaxRunes {
		t.Errorf("Subject has %d characters, want %d", n, subjectMaxRunes)
	}
}
