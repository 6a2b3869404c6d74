package stt

import (
	"net/http"
	"testing"
)

// Every adapter reports the Date of a throttled answer with its
// Retry-After, so that the worker can measure an HTTP-date against the
// vendor's clock; a Date the server did not set is the one net/http adds.
func TestAdaptersReportDate(t *testing.T) {
	t.Parallel()
	const (
		date       = "Sun, 01 Mar 2026 12:00:00 GMT"
		retryAfter = "Sun, 01 Mar 2026 12:00:07 GMT"
	)
	adapters := []struct {
		name    string
		fixture [2]string
		submit  func(t *testing.T, v *vendor) (Response, error)
	}{
		{"generic-http", [2]string{"generic", "error_rate_limited.json"}, func(t *testing.T, v *vendor) (Response, error) {
			return newGeneric(t, v).Submit(t.Context(), genericRequest())
		}},
		{"openai", [2]string{"openai", "error_rate_limit.json"}, func(t *testing.T, v *vendor) (Response, error) {
			return newOpenAI(t, v).Submit(t.Context(), openAIRequest())
		}},
		{"deepgram", [2]string{"deepgram", "error_too_many_requests.json"}, func(t *testing.T, v *vendor) (Response, error) {
			return newDeepgram(t, v).Submit(t.Context(), deepgramURLRequest())
		}},
		{"assemblyai", [2]string{"assemblyai", "error_rate_limited.json"}, func(t *testing.T, v *vendor) (Response, error) {
			return newAssemblyAI(t, v).Submit(t.Context(), assemblyAIURLRequest())
		}},
	}
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			body := fixture(t, a.fixture[0], a.fixture[1])
			v := newVendor(t, answer(429, body, "Retry-After", retryAfter, "Date", date))
			got, err := a.submit(t, v)
			mustNoErr(t, err)
			if got.HTTPStatus != 429 || !eqp(got.RetryAfter, strp(retryAfter)) || !eqp(got.Date, strp(date)) {
				t.Errorf("status %d RetryAfter %s Date %s, want 429 %q %q", got.HTTPStatus, show(got.RetryAfter), show(got.Date), retryAfter, date)
			}

			v = newVendor(t, answer(429, body, "Retry-After", retryAfter))
			got, err = a.submit(t, v)
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
