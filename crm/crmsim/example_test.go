package crmsim_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/crm/crmsim"
)

// The CRM double behind httptest, with the webhook target delivering one
// action set twice: applied once, replayed once.
func Example() {
	sim, err := crmsim.New(crmsim.Config{})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()

	tg, err := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: srv.URL, Token: crmsim.TokenDefault})
	if err != nil {
		panic(err)
	}
	set := crm.ActionSet{
		TenantID: "t1", CallID: "call-42", ActionVersion: 1,
		RecordingSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		CommittedAt:     time.Date(2026, 11, 29, 17, 4, 5, 0, time.UTC),
		Actions: []crm.Action{
			{Kind: crm.KindCallNote, Text: "Caller asked for the Q1 rate sheet."},
			{Kind: crm.KindRateSheetPromised, Lanes: []string{"Chicago to Dallas"}, Due: "2026-12-01"},
		},
	}
	for attempt := 1; attempt <= 2; attempt++ {
		r, err := tg.Deliver(context.Background(), connector.Delivery{Set: set, Attempt: attempt})
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Outcome, r.HTTPStatus, r.CRMID)
	}
	st := sim.Stats()
	fmt.Println("deliveries", st.Deliveries, "applied", st.Applied, "replays", st.Replays, "apply count", st.ApplyCount[set.IdempotencyKey()])
	fmt.Println("holds", len(sim.ActionSets()), "set:", sim.ActionSets()[0].Actions[1].Lanes[0])
	// Output:
	// applied 201 crm_1
	// replayed 200 crm_1
	// deliveries 2 applied 1 replays 1 apply count 1
	// holds 1 set: Chicago to Dallas
}

// A CRM whose integration quota is spent: the 429 carries the time left.
func ExampleConfig_rateLimit() {
	sim, _ := crmsim.New(crmsim.Config{RateLimitShare: 1, Cooldown: 30 * time.Second})
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()

	tg, _ := connector.New(connector.Config{Kind: connector.KindWebhook, BaseURL: srv.URL, Token: crmsim.TokenDefault})
	set := crm.ActionSet{TenantID: "t1", CallID: "call-7", ActionVersion: 1, RecordingSHA256: "ab",
		CommittedAt: time.Now(), Actions: []crm.Action{{Kind: crm.KindCallNote, Text: "hi"}}}
	r, _ := tg.Deliver(context.Background(), connector.Delivery{Set: set, Attempt: 1})
	fmt.Println(r.Outcome, r.Class, r.HTTPStatus, "Retry-After:", *r.RetryAfter)
	// Output:
	// throttled rate_limited 429 Retry-After: 30
}
