package stt

import (
	"context"
	"net/http"
	"net/url"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// userAgent identifies callscribe to vendors.
const userAgent = "callscribe-stt/1"

// endpoint is what every adapter needs to speak HTTP to its vendor: the
// shared shell and the vendor's API key.
type endpoint struct {
	vendorhttp.Endpoint
	apiKey string
}

// exchange makes one HTTP exchange within Config.Timeout: build makes the
// request on the context it is given. It returns the reply, or, when no
// usable reply arrived, the Response that says so (failed true).
func (e *endpoint) exchange(ctx context.Context, s scrubber, build func(ctx context.Context) (*http.Request, error)) (rep vendorhttp.Reply, failed *Response, err error) {
	rep, f, err := e.Exchange(ctx, s, build)
	if f != nil {
		// Whether the vendor received the request is unknown: retry.
		return vendorhttp.Reply{}, &Response{Outcome: OutcomeTransient, Class: f.Class, HTTPStatus: f.Status, Message: f.Message}, nil
	}
	return rep, nil, err
}

// setHeaders sets the caller's extra headers, then the adapter's own,
// which win.
func setHeaders(req *http.Request, extra http.Header, own map[string]string) {
	for k, vs := range extra {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	for k, v := range own {
		if v == "" {
			continue
		}
		req.Header.Set(k, v)
	}
}

// statusTable is the outcome and class the adapters share for a non-2xx
// status; each adapter overrides the rows its vendor defines otherwise.
// 503 is throttling only when the response carries a Retry-After. A 3xx
// is permanent: redirects are not followed (the client refuses them), and a
// vendor API that redirects its requests is misconfigured (a base URL
// that moved, http to an https-only host); retrying gets the same answer.
var statusTable = vendorhttp.StatusTable{
	Rows: func() map[int]vendorhttp.Rule {
		rows := vendorhttp.CommonRows()
		rows[http.StatusRequestEntityTooLarge] = vendorhttp.Rule{Verdict: vendorhttp.Refuse, Class: ClassAudioTooLarge}
		rows[http.StatusUnsupportedMediaType] = vendorhttp.Rule{Verdict: vendorhttp.Refuse, Class: ClassUnsupportedMedia}
		return rows
	}(),
	Redirect:    vendorhttp.Rule{Verdict: vendorhttp.Refuse, Class: ClassUnexpectedRedirect},
	ClientError: vendorhttp.Rule{Verdict: vendorhttp.Retry, Class: ClassUnexpectedStatus},
	ServerError: vendorhttp.Rule{Verdict: vendorhttp.Retry, Class: ClassServerError},
	Other:       vendorhttp.Rule{Verdict: vendorhttp.Retry, Class: ClassUnexpectedStatus},
}

// verdictOutcome is what each verdict of the shell means for a job.
var verdictOutcome = map[vendorhttp.Verdict]Outcome{
	vendorhttp.Retry:    OutcomeTransient,
	vendorhttp.Throttle: OutcomeThrottled,
	vendorhttp.Refuse:   OutcomePermanent,
}

// commonStatus is the outcome and class of a non-2xx status by
// statusTable.
func commonStatus(status int, h http.Header) (Outcome, string) {
	v, class := statusTable.Classify(status, h)
	return verdictOutcome[v], class
}

// errorResponse builds the Response for a non-2xx reply.
func errorResponse(rep vendorhttp.Reply, outcome Outcome, class, msg string, s scrubber) Response {
	return Response{
		Outcome:    outcome,
		Class:      class,
		HTTPStatus: rep.Status,
		RetryAfter: vendorhttp.RawHeader(rep.Header, "Retry-After"),
		Date:       vendorhttp.RawHeader(rep.Header, "Date"),
		Message:    s.Message(msg),
	}
}

// badResponse is the Response for a 2xx whose body cannot be understood.
func badResponse(rep vendorhttp.Reply, why string, s scrubber) Response {
	return Response{Outcome: OutcomeTransient, Class: ClassBadResponse, HTTPStatus: rep.Status, Message: s.Message(why)}
}

// clamp01 keeps a confidence in 0..1.
func clamp01(f float64) float64 {
	switch {
	case f < 0:
		return 0
	case f > 1:
		return 1
	}
	return f
}

// confidenceOr returns *f clamped to 0..1, or -1 when the vendor gave none.
func confidenceOr(f *float64) float64 {
	if f == nil {
		return -1
	}
	return clamp01(*f)
}

// model returns the request's model, or the configured one.
func model(req Request, configured string) string {
	if req.Model != "" {
		return req.Model
	}
	return configured
}

// httpAudioURL reports whether the audio URL is one a vendor can fetch.
func httpAudioURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
