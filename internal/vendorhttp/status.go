package vendorhttp

import "net/http"

// Classes of a status that is not a success, shared by the adapters'
// tables. The adapters' own Class constants have the same values.
const (
	ClassInvalidRequest   = "invalid_request"   // 400, 422
	ClassUnauthorized     = "unauthorized"      // 401
	ClassForbidden        = "forbidden"         // 403
	ClassNotFound         = "not_found"         // 404
	ClassRateLimited      = "rate_limited"      // 429
	ClassUnavailable      = "unavailable"       // 503
	ClassServerError      = "server_error"      // other 5xx
	ClassUnexpectedStatus = "unexpected_status" // a status no rule covers
	ClassBadResponse      = "bad_response"      // a success whose body cannot be understood
)

// Verdict is what a status means before an adapter names its outcome.
type Verdict int

const (
	// Retry: try again with backoff (the adapters' "transient").
	Retry Verdict = iota + 1
	// Throttle: the vendor's quota is spent; defer the throttling scope.
	Throttle
	// Refuse: the same request will get the same answer; never retry
	// (STT "permanent", CRM "dead").
	Refuse
)

// String returns "retry", "throttle" or "refuse".
func (v Verdict) String() string {
	switch v {
	case Retry:
		return "retry"
	case Throttle:
		return "throttle"
	case Refuse:
		return "refuse"
	}
	return "unknown"
}

// Rule is one row of a StatusTable.
type Rule struct {
	Verdict Verdict
	Class   string
	// ThrottleOnRetryAfter makes the row Throttle when the answer carries
	// a Retry-After (503: throttling only with a timing signal).
	ThrottleOnRetryAfter bool
}

// StatusTable classifies a status that is not a success: its row in
// Rows, else the fallback of its status class. The zero fallback Rule has
// no Verdict; set every one a table can reach.
type StatusTable struct {
	Rows map[int]Rule
	// Redirect is for a 3xx without a row, ClientError for a 4xx,
	// ServerError for a 5xx, Other for anything else (1xx, a 2xx the
	// vendor does not define).
	Redirect, ClientError, ServerError, Other Rule
}

// CommonRows are the rows every vendor table starts from: 400 and 422
// invalid, 401, 403 and 404 refused, 408 a timeout, 429 throttled, 503
// unavailable (throttled with a Retry-After). It returns a new map that
// the caller may extend.
func CommonRows() map[int]Rule {
	return map[int]Rule{
		http.StatusBadRequest:          {Verdict: Refuse, Class: ClassInvalidRequest},
		http.StatusUnprocessableEntity: {Verdict: Refuse, Class: ClassInvalidRequest},
		http.StatusUnauthorized:        {Verdict: Refuse, Class: ClassUnauthorized},
		http.StatusForbidden:           {Verdict: Refuse, Class: ClassForbidden},
		http.StatusNotFound:            {Verdict: Refuse, Class: ClassNotFound},
		http.StatusRequestTimeout:      {Verdict: Retry, Class: ClassTimeout},
		http.StatusTooManyRequests:     {Verdict: Throttle, Class: ClassRateLimited},
		http.StatusServiceUnavailable:  {Verdict: Retry, Class: ClassUnavailable, ThrottleOnRetryAfter: true},
	}
}

// Classify returns the verdict and class of status, given the answer's
// header.
func (t StatusTable) Classify(status int, h http.Header) (Verdict, string) {
	r, ok := t.Rows[status]
	if !ok {
		switch {
		case status >= 300 && status <= 399:
			r = t.Redirect
		case status >= 400 && status <= 499:
			r = t.ClientError
		case status >= 500 && status <= 599:
			r = t.ServerError
		default:
			r = t.Other
		}
	}
	if r.ThrottleOnRetryAfter && len(h.Values("Retry-After")) > 0 {
		return Throttle, r.Class
	}
	return r.Verdict, r.Class
}
