package stt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// userAgent identifies callscribe to vendors.
const userAgent = "callscribe-stt/1"

// endpoint is what every adapter needs to speak HTTP to its vendor.
type endpoint struct {
	client  *http.Client
	base    *url.URL // no trailing slash, no query
	apiKey  string
	timeout time.Duration // <= 0: none
	maxBody int64
}

// url returns the base URL followed by path, which must already be
// escaped, and the encoded query, if any.
func (e *endpoint) url(path string, query url.Values) string {
	u := e.base.String() + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}

// withTimeout bounds one exchange by Config.Timeout.
func (e *endpoint) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, e.timeout)
}

// reply is a response read whole.
type reply struct {
	status    int
	header    http.Header
	body      []byte
	truncated bool // the body was longer than MaxResponseBytes; body holds the first MaxResponseBytes
}

// ok reports a 2xx status.
func (r reply) ok() bool { return r.status >= 200 && r.status <= 299 }

// exchange makes one HTTP exchange within Config.Timeout: build makes the
// request on the context it is given. It returns the reply, or, when no
// usable reply arrived, the Response that says so (failed true).
func (e *endpoint) exchange(ctx context.Context, s scrubber, build func(ctx context.Context) (*http.Request, error)) (rep reply, failed *Response, err error) {
	xctx, cancel := e.withTimeout(ctx)
	defer cancel()
	req, err := build(xctx)
	if err != nil {
		return reply{}, nil, err
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := e.client.Do(req)
	if err != nil {
		r := networkFailure(ctx, 0, err, s)
		return reply{}, &r, nil
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, e.maxBody+1))
	if err != nil {
		r := networkFailure(ctx, resp.StatusCode, err, s)
		return reply{}, &r, nil
	}
	rep = reply{status: resp.StatusCode, header: resp.Header, body: body}
	if int64(len(body)) > e.maxBody {
		rep.body, rep.truncated = body[:e.maxBody], true
		if rep.ok() {
			return reply{}, &Response{
				Outcome:    OutcomeTransient,
				Class:      ClassResponseTooLarge,
				HTTPStatus: resp.StatusCode,
				Message:    fmt.Sprintf("response body exceeds MaxResponseBytes (%d)", e.maxBody),
			}, nil
		}
	}
	return rep, nil, nil
}

// networkFailure turns a failed exchange into a transient Response:
// canceled when the caller's context was canceled, timeout for a deadline
// or a network timeout, network otherwise.
func networkFailure(callerCtx context.Context, status int, err error, s scrubber) Response {
	class := ClassNetwork
	var ne net.Error
	switch {
	case errors.Is(callerCtx.Err(), context.Canceled):
		class = ClassCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		class = ClassTimeout
	}
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Err.Error() // without the method and URL
	}
	return Response{Outcome: OutcomeTransient, Class: class, HTTPStatus: status, Message: s.message(msg)}
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

// rawHeader returns the named header exactly as received, several fields
// joined with ", ", or nil when absent.
func rawHeader(h http.Header, name string) *string {
	vs := h.Values(name)
	if len(vs) == 0 {
		return nil
	}
	s := strings.Join(vs, ", ")
	return &s
}

// plainText returns the body when the server said it is text/plain: the
// message of a vendor that answers errors without JSON.
func plainText(rep reply) string {
	mt, _, err := mime.ParseMediaType(rep.header.Get("Content-Type"))
	if err != nil || mt != "text/plain" {
		return ""
	}
	return string(rep.body)
}

// commonStatus is the outcome and class the adapters share for a non-2xx
// status; each adapter overrides the rows its vendor defines otherwise.
// 503 is throttling only when the response carries a Retry-After.
func commonStatus(status int, h http.Header) (Outcome, string) {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return OutcomePermanent, ClassInvalidRequest
	case http.StatusUnauthorized:
		return OutcomePermanent, ClassUnauthorized
	case http.StatusForbidden:
		return OutcomePermanent, ClassForbidden
	case http.StatusNotFound:
		return OutcomePermanent, ClassNotFound
	case http.StatusRequestEntityTooLarge:
		return OutcomePermanent, ClassAudioTooLarge
	case http.StatusUnsupportedMediaType:
		return OutcomePermanent, ClassUnsupportedMedia
	case http.StatusRequestTimeout:
		return OutcomeTransient, ClassTimeout
	case http.StatusTooManyRequests:
		return OutcomeThrottled, ClassRateLimited
	case http.StatusServiceUnavailable:
		if len(h.Values("Retry-After")) > 0 {
			return OutcomeThrottled, ClassUnavailable
		}
		return OutcomeTransient, ClassUnavailable
	}
	if status >= 500 && status <= 599 {
		return OutcomeTransient, ClassServerError
	}
	return OutcomeTransient, ClassUnexpectedStatus
}

// errorResponse builds the Response for a non-2xx reply.
func errorResponse(rep reply, outcome Outcome, class, msg string, s scrubber) Response {
	return Response{
		Outcome:    outcome,
		Class:      class,
		HTTPStatus: rep.status,
		RetryAfter: rawHeader(rep.header, "Retry-After"),
		Message:    s.message(msg),
	}
}

// badResponse is the Response for a 2xx whose body cannot be understood.
func badResponse(rep reply, why string, s scrubber) Response {
	return Response{Outcome: OutcomeTransient, Class: ClassBadResponse, HTTPStatus: rep.status, Message: s.message(why)}
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
