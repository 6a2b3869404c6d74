package extract_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/extract"
)

// A call on Monday 2026-11-23 in Chicago: "by Friday" is that week's Friday,
// "next Thursday" the Thursday of next week, and the pickup window is in the
// tenant's zone.
func ExampleRuleExtractor_Extract() {
	chicago, err := time.LoadLocation("America/Chicago")
	if err != nil {
		panic(err)
	}
	actions, err := extract.RuleExtractor{}.Extract(context.Background(), crm.ExtractInput{
		TenantID: "northline",
		CallID:   "call-42",
		Text: "Thanks for the call. I'll send you the rate sheet for Chicago to Dallas and Salt Lake City to " +
			"New York by Friday. Please move the pickup for PO 4471 to Tuesday between eight and ten a.m., " +
			"and let's talk again next Thursday.",
		StartedAt: time.Date(2026, 11, 23, 9, 12, 40, 0, chicago),
		Location:  chicago,
	})
	if err != nil {
		panic(err)
	}
	for _, a := range actions {
		switch a.Kind {
		case crm.KindCallNote:
			summary, excerpt, _ := strings.Cut(a.Text, "\n\n")
			fmt.Printf("%s: %s\n  %.40s…\n", a.Kind, summary, excerpt)
		case crm.KindRateSheetPromised:
			fmt.Printf("%s %q due %s\n", a.Kind, a.Lanes, a.Due)
		case crm.KindPickupWindowChange:
			fmt.Println(a.Kind, a.ShipmentRef, a.Window.Start.Format(time.RFC3339), "to", a.Window.End.Format(time.Kitchen))
		case crm.KindNextCall:
			fmt.Println(a.Kind, a.Date)
		}
	}
	// Output:
	// call_note: Call call-42: rate sheet promised for 2 lanes by 2026-11-27; pickup change for PO-4471 (2026-11-24 08:00-10:00); next call 2026-12-03
	//   Thanks for the call. I'll send you the r…
	// rate_sheet_promised ["Chicago to Dallas" "Salt Lake City to New York"] due 2026-11-27
	// pickup_window_change PO-4471 2026-11-24T08:00:00-06:00 to 10:00AM
	// next_call 2026-12-03
}

// ResolveDate reads relative dates the way a US business caller means them.
func ExampleResolveDate() {
	chicago, err := time.LoadLocation("America/Chicago")
	if err != nil {
		panic(err)
	}
	tuesday := time.Date(2026, 11, 24, 14, 5, 0, 0, chicago)
	for _, phrase := range []string{"tomorrow", "Wednesday", "this Wednesday", "next Wednesday", "by end of day", "December 3rd", "the 1st"} {
		d, ok := extract.ResolveDate(phrase, tuesday)
		fmt.Printf("%-16s %s %v\n", phrase, d.Format("Mon 2006-01-02"), ok)
	}
	// Output:
	// tomorrow         Wed 2026-11-25 true
	// Wednesday        Wed 2026-11-25 true
	// this Wednesday   Wed 2026-11-25 true
	// next Wednesday   Wed 2026-12-02 true
	// by end of day    Tue 2026-11-24 true
	// December 3rd     Thu 2026-12-03 true
	// the 1st          Tue 2026-12-01 true
}
