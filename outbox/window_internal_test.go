package outbox

import (
	"testing"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/crm/connector"
)

// What each kind of CRM answer tells the window: overload for throttling,
// nothing for a transient failure, success for every definite answer.
func TestWindowOutcome(t *testing.T) {
	t.Parallel()
	ra := "2"
	for _, tt := range []struct {
		name string
		res  connector.Result
		want capacity.Outcome
	}{
		{"applied", connector.Result{Outcome: connector.OutcomeApplied, Class: connector.ClassApplied, HTTPStatus: 201}, capacity.Success},
		{"replayed", connector.Result{Outcome: connector.OutcomeReplayed, Class: connector.ClassReplayed, HTTPStatus: 200}, capacity.Success},
		{"refused for good", connector.Result{Outcome: connector.OutcomeDead, Class: connector.ClassInvalidRequest, HTTPStatus: 422}, capacity.Success},
		{"key reused", connector.Result{Outcome: connector.OutcomeDead, Class: connector.ClassIdempotencyKeyReused, HTTPStatus: 409}, capacity.Success},
		{"429", connector.Result{Outcome: connector.OutcomeThrottled, Class: connector.ClassRateLimited, HTTPStatus: 429, RetryAfter: &ra}, capacity.Overload},
		{"429 without Retry-After", connector.Result{Outcome: connector.OutcomeThrottled, Class: connector.ClassRateLimited, HTTPStatus: 429}, capacity.Overload},
		{"request limit", connector.Result{Outcome: connector.OutcomeThrottled, Class: connector.ClassRequestLimitExceeded, HTTPStatus: 403}, capacity.Overload},
		{"503 with Retry-After", connector.Result{Outcome: connector.OutcomeThrottled, Class: connector.ClassUnavailable, HTTPStatus: 503, RetryAfter: &ra}, capacity.Overload},
		{"transient 503 with Retry-After", connector.Result{Outcome: connector.OutcomeTransient, Class: connector.ClassUnavailable, HTTPStatus: 503, RetryAfter: &ra}, capacity.Overload},
		{"500", connector.Result{Outcome: connector.OutcomeTransient, Class: connector.ClassServerError, HTTPStatus: 500}, capacity.Neutral},
		{"503 without Retry-After", connector.Result{Outcome: connector.OutcomeTransient, Class: connector.ClassServerError, HTTPStatus: 503}, capacity.Neutral},
		{"network", connector.Result{Outcome: connector.OutcomeTransient, Class: connector.ClassNetwork}, capacity.Neutral},
		{"timeout", connector.Result{Outcome: connector.OutcomeTransient, Class: connector.ClassTimeout}, capacity.Neutral},
		{"cancelled", connector.Result{Outcome: connector.OutcomeTransient, Class: connector.ClassCanceled}, capacity.Neutral},
	} {
		if got := windowOutcome(tt.res); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
