package clock_test

import (
	"fmt"
	"time"

	"github.com/callscribe/callscribe/clock"
)

// A test hands a Stub to the Config's Clock field and moves it by hand.
func ExampleStub() {
	c := clock.NewStub(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var now clock.Clock = c // what a Config's Clock field holds
	fmt.Println(now.Now().Format(time.RFC3339))
	c.Advance(90 * time.Second)
	fmt.Println(now.Now().Format(time.RFC3339))
	// Output:
	// 2026-03-01T12:00:00Z
	// 2026-03-01T12:01:30Z
}
