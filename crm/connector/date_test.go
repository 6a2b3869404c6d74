package connector

import (
	"net/http"
	"testing"
)

// Every target reports the Date of a throttled answer with its
// Retry-After, so that the dispatcher can measure an HTTP-date against the
// CRM's clock; a Date the server did not set is the one net/http adds.
func TestTargetsReportDate(t *testing.T) {
	t.Parallel()
	const (
		date       = "Sun, 01 Mar 2026 12:00:00 GMT"
		retryAfter = "Sun, 01 Mar 2026 12:00:07 GMT"
	)
	for _, c := range []struct{ kind, vendor, fixture string }{
		{KindWebhook, "webhook", "error_rate_limited.json"},
		{KindSalesforce, "salesforce", "error_request_limit_exceeded.json"},
		{KindHubSpot, "hubspot", "error_rate_limit_secondly.json"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			t.Parallel()
			body := fixture(t, c.vendor, c.fixture)
			f := newFakeCRM(t, answer(429, body, "Retry-After", retryAfter, "Date", date))
			got, err := f.target(t, c.kind).Deliver(t.Context(), delivery())
			mustNoErr(t, err)
			if got.HTTPStatus != 429 || !eqp(got.RetryAfter, strp(retryAfter)) || !eqp(got.Date, strp(date)) {
				t.Errorf("status %d RetryAfter %s Date %s, want 429 %q %q", got.HTTPStatus, show(got.RetryAfter), show(got.Date), retryAfter, date)
			}

			f = newFakeCRM(t, answer(429, body, "Retry-After", retryAfter))
			got, err = f.target(t, c.kind).Deliver(t.Context(), delivery())
			mustNoErr(t, err)
			if got.Date == nil {
				t.Fatalf("Date nil, want the one net/http sets")
			}
			if _, err := http.ParseTime(*got.Date); err != nil {
				t.Errorf("Date %q: %v", *got.Date, err)
			}
		})
	}
}
