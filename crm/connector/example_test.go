package connector_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/connector"
)

// A webhook target against a CRM speaking crm-webhook/v1: the first
// attempt is throttled, the second applies the set, and a replay of the
// same set changes nothing.
func ExampleNew() {
	answers := []struct {
		status int
		header string
		body   string
	}{
		{429, "17", `{"error": {"type": "rate_limited", "message": "quota spent"}}`},
		{201, "", `{"id": "crm_789", "applied_at": "2026-11-29T17:04:06Z"}`},
		{200, "", `{"id": "crm_789", "applied_at": "2026-11-29T17:04:06Z"}`},
	}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[n]
		n++
		fmt.Println("CRM got", r.Method, r.URL.Path, "key", r.Header.Get("Idempotency-Key"), "attempt", r.Header.Get("X-Delivery-Attempt"))
		if a.header != "" {
			w.Header().Set("Retry-After", a.header)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	defer srv.Close()

	tg, err := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: srv.URL, Token: "crm-token"})
	if err != nil {
		panic(err)
	}
	set := crm.ActionSet{
		TenantID: "t1", CallID: "call-42", ActionVersion: 1,
		RecordingSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		CommittedAt:     time.Date(2026, 11, 29, 17, 4, 5, 0, time.UTC),
		Actions: []crm.Action{
			{Kind: crm.KindCallNote, Text: "Caller asked for the Q1 rate sheet."},
			{Kind: crm.KindNextCall, Date: "2026-12-04"},
		},
	}
	ctx := context.Background()
	for attempt := 1; attempt <= 3; attempt++ {
		r, err := tg.Deliver(ctx, connector.Delivery{Set: set, Attempt: attempt})
		if err != nil {
			panic(err)
		}
		retryAfter := "-"
		if r.RetryAfter != nil {
			retryAfter = *r.RetryAfter
		}
		fmt.Println(r.Outcome, r.Class, r.HTTPStatus, "crm id:", r.CRMID, "Retry-After:", retryAfter)
	}
	// Output:
	// CRM got POST /v1/action-sets key t1:call-42:1 attempt 1
	// throttled rate_limited 429 crm id:  Retry-After: 17
	// CRM got POST /v1/action-sets key t1:call-42:1 attempt 2
	// applied applied 201 crm id: crm_789 Retry-After: -
	// CRM got POST /v1/action-sets key t1:call-42:1 attempt 3
	// replayed replayed 200 crm id: crm_789 Retry-After: -
}

// Salesforce and HubSpot upsert each action by a stable external id: the
// same on every attempt and every replay.
func ExampleExternalID() {
	set := crm.ActionSet{TenantID: "t1", CallID: "call-42", ActionVersion: 2,
		Actions: []crm.Action{{Kind: crm.KindCallNote}, {Kind: crm.KindNextCall, Date: "2026-12-04"}}}
	fmt.Println(connector.ExternalID(set, 0))
	fmt.Println(connector.ExternalID(set, 1))
	set.CallID = "CA9f2c" // upper case: Salesforce would match it case-insensitively
	fmt.Println(connector.ExternalID(set, 1)[:12] + "…")
	// Output:
	// t1:call-42:2:0
	// t1:call-42:2:1
	// cs1_3559af46…
}

// Every network failure is a Result, not an error: here, nothing listens.
func ExampleTarget_Deliver_network() {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()

	tg, _ := connector.New(connector.Config{Kind: connector.KindHubSpot, BaseURL: base, Token: "pat-na1-secret"})
	set := crm.ActionSet{TenantID: "t1", CallID: "call-42", ActionVersion: 1, CommittedAt: time.Now(),
		Actions: []crm.Action{{Kind: crm.KindCallNote, Text: "hi"}}}
	r, err := tg.Deliver(context.Background(), connector.Delivery{Set: set, Attempt: 1})
	fmt.Println(err, r.Outcome, r.Class, r.HTTPStatus)
	// Output:
	// <nil> transient network 0
}
