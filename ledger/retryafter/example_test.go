package retryafter_test

import (
	"fmt"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// midpointRand always picks the middle of the range, so that the example's
// backoff is predictable; production code leaves Policy.Rand nil.
type midpointRand struct{}

func (midpointRand) Int64N(n int64) int64 { return n / 2 }

func ExampleParse() {
	now := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	for _, raw := range []string{
		"120",
		"Sun, 01 Mar 2026 12:05:00 GMT",
		"Sunday, 01-Mar-26 12:05:00 GMT",
		"Sun Mar  1 12:05:00 2026",
		"99999999999999999999",
		"1.5",
		"Sun, 01 Mar 2026 12:05:00 UTC",
	} {
		v, err := retryafter.Parse(raw, now)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%-13s delay=%v overflow=%v\n", v.Form, v.Delay, v.Overflow)
	}
	// Output:
	// delay-seconds delay=2m0s overflow=false
	// imf-fixdate   delay=5m0s overflow=false
	// rfc850        delay=5m0s overflow=false
	// asctime       delay=5m0s overflow=false
	// delay-seconds delay=2562047h47m16.854775807s overflow=true
	// retry-after "1.5": fractional seconds are not allowed
	// retry-after "Sun, 01 Mar 2026 12:05:00 UTC": HTTP-date must be in GMT
}

func ExamplePolicy_Decide() {
	policy := retryafter.Policy{
		MaxDelay: 30 * time.Minute,
		Clock:    clock.NewStub(time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)),
		Rand:     midpointRand{},
	}
	if err := policy.Validate(); err != nil {
		panic(err)
	}

	fmt.Println(policy.Decide("120", true, 0))
	fmt.Println(policy.Decide("86400", true, 0))
	fmt.Println(policy.Decide("Sun, 06 Nov 1994 08:49:37 GMT", true, 1))
	fmt.Println(policy.Decide("", false, 3))
	fmt.Println(policy.DecideDelay(1500*time.Millisecond, "1500ms", 0))
	// Output:
	// source=retry-after form=delay-seconds raw="120" attempt=0 delay=2m0s not_before=2026-03-01T12:02:00Z
	// source=retry-after form=delay-seconds raw="86400" attempt=0 delay=30m0s requested=24h0m0s clamped=true not_before=2026-03-01T12:30:00Z
	// source=backoff fallback=past-date form=imf-fixdate date_reference=host-clock raw="Sun, 06 Nov 1994 08:49:37 GMT" attempt=1 delay=1s not_before=2026-03-01T12:00:01Z
	// source=backoff fallback=missing attempt=3 delay=4s not_before=2026-03-01T12:00:04Z
	// source=vendor-delay raw="1500ms" attempt=0 delay=1.5s not_before=2026-03-01T12:00:01.5Z
}

// A worker whose clock runs 5 s fast gets a Retry-After date 7 s after the
// vendor's Date: measured against the Date it waits 7 s; without a Date, the
// host's clock makes it 2 s.
func ExamplePolicy_DecideFor() {
	policy := retryafter.Policy{
		Clock: clock.NewStub(time.Date(2026, time.March, 1, 12, 0, 5, 0, time.UTC)),
		Rand:  midpointRand{},
	}
	const retryAfter = "Sun, 01 Mar 2026 12:00:07 GMT"
	fmt.Println(policy.DecideFor(retryAfter, true, "Sun, 01 Mar 2026 12:00:00 GMT", 0))
	fmt.Println(policy.DecideFor(retryAfter, true, "", 0))
	fmt.Println(policy.DecideFor("120", true, "Sun, 01 Mar 2026 12:00:00 GMT", 0))
	// Output:
	// source=retry-after form=imf-fixdate date_reference=date-header raw="Sun, 01 Mar 2026 12:00:07 GMT" attempt=0 delay=7s not_before=2026-03-01T12:00:12Z
	// source=retry-after form=imf-fixdate date_reference=host-clock raw="Sun, 01 Mar 2026 12:00:07 GMT" attempt=0 delay=2s not_before=2026-03-01T12:00:07Z
	// source=retry-after form=delay-seconds raw="120" attempt=0 delay=2m0s not_before=2026-03-01T12:02:05Z
}

func ExampleBackoff() {
	for attempt := range 5 {
		ceiling := retryafter.BackoffCeiling(time.Second, 10*time.Second, attempt)
		delay := retryafter.Backoff(time.Second, 10*time.Second, attempt, midpointRand{})
		fmt.Printf("attempt %d: ceiling %v, delay %v\n", attempt, ceiling, delay)
	}
	// Output:
	// attempt 0: ceiling 1s, delay 500ms
	// attempt 1: ceiling 2s, delay 1s
	// attempt 2: ceiling 4s, delay 2s
	// attempt 3: ceiling 8s, delay 4s
	// attempt 4: ceiling 10s, delay 5s
}
