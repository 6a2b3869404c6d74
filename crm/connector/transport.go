package connector

import (
	"bytes"
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

// userAgent identifies callscribe to CRMs.
const userAgent = "callscribe-crm/1"

// endpoint is what every target needs to speak HTTP to its CRM.
type endpoint struct {
	client  *http.Client // never follows redirects
	base    *url.URL     // no trailing slash, no query
	token   string
	timeout time.Duration // <= 0: none
	now     func() time.Time
	scrub   scrubber
}

// url returns the base URL followed by path, which must already be
// escaped.
func (e *endpoint) url(path string) string { return e.base.String() + path }

// withTimeout bounds one exchange by Config.Timeout.
func (e *endpoint) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, e.timeout)
}

// reply is an answer read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// ok reports a 2xx status.
func (r reply) ok() bool { return r.status >= 200 && r.status <= 299 }

// exchange makes one HTTP exchange within Config.Timeout, with the
// Bearer token, JSON content type and the given headers. It returns the
// reply, or, when no usable reply arrived, the Result that says so.
func (e *endpoint) exchange(ctx context.Context, method, path string, body []byte, headers map[string]string) (reply, *Result) {
	xctx, cancel := e.withTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(xctx, method, e.url(path), bytes.NewReader(body))
	if err != nil {
		// The base URL was validated and the path escaped: only a
		// programming error gets here.
		r := Result{Outcome: OutcomeTransient, Class: ClassNetwork, Message: e.scrub.message("building the request: " + err.Error())}
		return reply{}, &r
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		r := networkFailure(ctx, 0, err, e.scrub)
		return reply{}, &r
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		r := networkFailure(ctx, resp.StatusCode, err, e.scrub)
		return reply{}, &r
	}
	rep := reply{status: resp.StatusCode, header: resp.Header, body: data}
	if len(data) > MaxResponseBytes {
		rep.body = data[:MaxResponseBytes]
		if rep.ok() {
			return reply{}, &Result{
				Outcome:    OutcomeTransient,
				Class:      ClassResponseTooLarge,
				HTTPStatus: resp.StatusCode,
				Message:    fmt.Sprintf("response body exceeds %d bytes", MaxResponseBytes),
			}
		}
	}
	return rep, nil
}

// networkFailure turns a failed exchange into a transient Result:
// canceled when the caller's context was canceled, timeout for a deadline
// or a network timeout, network otherwise.
func networkFailure(callerCtx context.Context, status int, err error, s scrubber) Result {
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
	return Result{Outcome: OutcomeTransient, Class: class, HTTPStatus: status, Message: s.message(msg)}
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

// plainText returns the body when it is text, not JSON or HTML: the
// message of a CRM or proxy that answers errors without JSON.
func plainText(rep reply) string {
	mt, _, err := mime.ParseMediaType(rep.header.Get("Content-Type"))
	if err != nil || mt != "text/plain" {
		return ""
	}
	return string(rep.body)
}

// commonStatus is the outcome and class the targets share for a status
// that is not a success; each target overrides the rows its CRM defines
// otherwise. 503 is throttling only when the answer carries a Retry-After,
// as on the speech-vendor side: the dispatcher honours it.
func commonStatus(status int, h http.Header) (Outcome, string) {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return OutcomeDead, ClassInvalidRequest
	case http.StatusUnauthorized:
		return OutcomeDead, ClassUnauthorized
	case http.StatusForbidden:
		return OutcomeDead, ClassForbidden
	case http.StatusNotFound:
		return OutcomeDead, ClassNotFound
	case http.StatusConflict:
		return OutcomeDead, ClassConflict
	case http.StatusTooManyRequests:
		return OutcomeThrottled, ClassRateLimited
	case http.StatusRequestTimeout:
		return OutcomeTransient, ClassTimeout
	case http.StatusLocked, http.StatusTooEarly:
		return OutcomeTransient, ClassUnexpectedStatus
	case http.StatusServiceUnavailable:
		if len(h.Values("Retry-After")) > 0 {
			return OutcomeThrottled, ClassUnavailable
		}
		return OutcomeTransient, ClassUnavailable
	}
	switch {
	case status >= 300 && status <= 399:
		// Redirects are not followed: the set was not delivered, and the
		// configured URL is wrong until someone fixes it.
		return OutcomeDead, ClassUnexpectedRedirect
	case status >= 400 && status <= 499:
		// A client error no rule covers: the same request will get the
		// same answer.
		return OutcomeDead, ClassUnexpectedStatus
	case status >= 500 && status <= 599:
		return OutcomeTransient, ClassServerError
	}
	// 1xx, or a 2xx the CRM does not define: whether it applied the set is
	// unknown, and the retry will say.
	return OutcomeTransient, ClassUnexpectedStatus
}

// errorResult builds the Result of a reply that is not a success.
func (e *endpoint) errorResult(rep reply, outcome Outcome, class, msg string) Result {
	if msg == "" {
		msg = http.StatusText(rep.status)
	}
	return Result{
		Outcome:    outcome,
		Class:      class,
		HTTPStatus: rep.status,
		RetryAfter: rawHeader(rep.header, "Retry-After"),
		Message:    e.scrub.message(msg),
	}
}

// badResponse is the Result of a success whose body cannot be understood.
func (e *endpoint) badResponse(rep reply, why string) Result {
	return Result{Outcome: OutcomeTransient, Class: ClassBadResponse, HTTPStatus: rep.status, Message: e.scrub.message(why)}
}
