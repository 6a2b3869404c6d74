package ledger_test

import (
	"fmt"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

func ExampleCanTransition() {
	fmt.Println(ledger.CanTransition(ledger.StateSubmitted, ledger.StateRetryWait))
	fmt.Println(ledger.CanTransition(ledger.StateRetryWait, ledger.StateSubmitted)) // only back to eligible
	fmt.Println(ledger.CanTransition(ledger.StateValidated, ledger.StateExpired))   // any non-terminal state may expire
	// Output:
	// true
	// false
	// true
}

func ExampleReplay() {
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	history := []ledger.Event{
		{Seq: 1, New: ledger.StateReceived, At: at},
		{Seq: 2, Prior: ledger.StateReceived, New: ledger.StateEligible, At: at.Add(time.Second)},
		{Seq: 3, Prior: ledger.StateEligible, New: ledger.StateSubmitted, Attempt: 1, At: at.Add(2 * time.Second)},
	}
	snap, err := ledger.Replay(history)
	fmt.Println(snap.State, snap.Attempt, snap.EventSeq, err)

	history[2].Prior = ledger.StateReceived // a forged event
	_, err = ledger.Replay(history)
	fmt.Println(err)
	// Output:
	// submitted 1 3 <nil>
	// event 3 leaves received but the recording was in eligible
}

func ExampleDecisionExtension() {
	policy := retryafter.Policy{Clock: clock.NewStub(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)), MaxDelay: time.Hour}
	d := policy.Decide("7200", true, 0) // a vendor asks for two hours
	e := ledger.DecisionExtension("openai:acme:whisper-1", d)
	fmt.Println(e.Scope, e.NotBefore.Format(time.RFC3339), *e.RetryAfter, e.Clamped)
	fmt.Println(e.Reason)
	// Output:
	// openai:acme:whisper-1 2026-11-29T11:00:00Z 7200 true
	// asked for 2h0m0s, clamped to 1h0m0s
}
