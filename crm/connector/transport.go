package connector

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// userAgent identifies callscribe to CRMs.
const userAgent = "callscribe-crm/1"

// endpoint is what every target needs to speak HTTP to its CRM: the shared
// shell (its client never follows redirects), the token, the clock and the
// scrubber that knows the token.
type endpoint struct {
	vendorhttp.Endpoint
	token string
	now   func() time.Time
	scrub scrubber
}

// exchange makes one HTTP exchange within Config.Timeout, with the
// Bearer token, JSON content type and the given headers. It returns the
// reply, or, when no usable reply arrived, the Result that says so.
func (e *endpoint) exchange(ctx context.Context, method, path string, body []byte, headers map[string]string) (vendorhttp.Reply, *Result) {
	rep, f, err := e.Exchange(ctx, e.scrub, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, method, e.URL(path, nil), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+e.token)
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		req.Header.Set("Accept", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		return req, nil
	})
	switch {
	case err != nil:
		// The base URL was validated and the path escaped: only a
		// programming error gets here.
		return vendorhttp.Reply{}, &Result{Outcome: OutcomeTransient, Class: ClassNetwork, Message: e.scrub.Message("building the request: " + err.Error())}
	case f != nil:
		// Whether the CRM applied the set is unknown: retry with the same
		// key.
		return vendorhttp.Reply{}, &Result{Outcome: OutcomeTransient, Class: f.Class, HTTPStatus: f.Status, Message: f.Message}
	}
	return rep, nil
}

// statusTable is the outcome and class the targets share for a status
// that is not a success; each target overrides the rows its CRM defines
// otherwise. 503 is throttling only when the answer carries a Retry-After,
// as on the speech-vendor side: the dispatcher honours it.
var statusTable = vendorhttp.StatusTable{
	Rows: func() map[int]vendorhttp.Rule {
		rows := vendorhttp.CommonRows()
		rows[http.StatusConflict] = vendorhttp.Rule{Verdict: vendorhttp.Refuse, Class: ClassConflict}
		rows[http.StatusLocked] = vendorhttp.Rule{Verdict: vendorhttp.Retry, Class: ClassUnexpectedStatus}
		rows[http.StatusTooEarly] = vendorhttp.Rule{Verdict: vendorhttp.Retry, Class: ClassUnexpectedStatus}
		return rows
	}(),
	// Redirects are not followed: the set was not delivered, and the
	// configured URL is wrong until someone fixes it.
	Redirect: vendorhttp.Rule{Verdict: vendorhttp.Refuse, Class: ClassUnexpectedRedirect},
	// A client error no rule covers: the same request will get the same
	// answer.
	ClientError: vendorhttp.Rule{Verdict: vendorhttp.Refuse, Class: ClassUnexpectedStatus},
	ServerError: vendorhttp.Rule{Verdict: vendorhttp.Retry, Class: ClassServerError},
	// 1xx, or a 2xx the CRM does not define: whether it applied the set
	// is unknown, and the retry will say.
	Other: vendorhttp.Rule{Verdict: vendorhttp.Retry, Class: ClassUnexpectedStatus},
}

// verdictOutcome is what each verdict of the shell means for a delivery.
var verdictOutcome = map[vendorhttp.Verdict]Outcome{
	vendorhttp.Retry:    OutcomeTransient,
	vendorhttp.Throttle: OutcomeThrottled,
	vendorhttp.Refuse:   OutcomeDead,
}

// commonStatus is the outcome and class of a status that is not a success
// by statusTable.
func commonStatus(status int, h http.Header) (Outcome, string) {
	v, class := statusTable.Classify(status, h)
	return verdictOutcome[v], class
}

// errorResult builds the Result of a reply that is not a success.
func (e *endpoint) errorResult(rep vendorhttp.Reply, outcome Outcome, class, msg string) Result {
	if msg == "" {
		msg = http.StatusText(rep.Status)
	}
	return Result{
		Outcome:    outcome,
		Class:      class,
		HTTPStatus: rep.Status,
		RetryAfter: vendorhttp.RawHeader(rep.Header, "Retry-After"),
		Date:       vendorhttp.RawHeader(rep.Header, "Date"),
		Message:    e.scrub.Message(msg),
	}
}

// badResponse is the Result of a success whose body cannot be understood.
func (e *endpoint) badResponse(rep vendorhttp.Reply, why string) Result {
	return Result{Outcome: OutcomeTransient, Class: ClassBadResponse, HTTPStatus: rep.Status, Message: e.scrub.Message(why)}
}
