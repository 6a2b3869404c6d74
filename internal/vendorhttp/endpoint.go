package vendorhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Classes of an exchange that gave no usable reply. The adapters' own
// Class constants have the same values.
const (
	ClassNetwork          = "network"            // reset, refused, a dropped connection, a malformed HTTP answer
	ClassTimeout          = "timeout"            // Endpoint.Timeout, the caller's deadline, a network timeout
	ClassCanceled         = "canceled"           // the caller's context was canceled
	ClassResponseTooLarge = "response_too_large" // a success body over Endpoint.MaxBody
)

// Endpoint is where an adapter's requests go and how each exchange is
// bounded. Build one per configured vendor; it is safe for concurrent use.
type Endpoint struct {
	// Client sends the requests. Required.
	Client *http.Client
	// Base is the API root: no trailing slash, no query (see ParseBase).
	Base *url.URL
	// Timeout bounds one exchange, from sending the request to reading
	// the whole answer. <= 0: none (the caller's context and
	// Client.Timeout still apply).
	Timeout time.Duration
	// MaxBody caps how much of a response body is read. A success body
	// over it is a ClassResponseTooLarge Failure; an error body is cut.
	MaxBody int64
	// UserAgent is sent with every request; "" sends Go's default.
	UserAgent string
}

// URL returns the base URL followed by path, which must already be
// escaped, and the encoded query, if any.
func (e *Endpoint) URL(path string, query url.Values) string {
	u := e.Base.String() + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}

// Reply is an answer read whole.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
	// Truncated: the body was longer than Endpoint.MaxBody; Body holds the
	// first MaxBody bytes.
	Truncated bool
}

// OK reports a 2xx status.
func (r Reply) OK() bool { return r.Status >= 200 && r.Status <= 299 }

// Failure is an exchange that gave no usable reply. Every Failure is
// worth retrying: whether the vendor acted on the request is unknown.
type Failure struct {
	// Class is ClassNetwork, ClassTimeout, ClassCanceled or
	// ClassResponseTooLarge.
	Class string
	// Status is the status of the answer, 0 when none arrived.
	Status int
	// Message says what happened, redacted and capped by the Redactor
	// given to Exchange.
	Message string
}

// Exchange makes one HTTP exchange within e.Timeout: build makes the
// request on the context it is given, and Exchange sets the User-Agent,
// sends it and reads the answer up to e.MaxBody. It returns the Reply, or
// a Failure when no usable reply arrived, or build's error unchanged.
func (e *Endpoint) Exchange(ctx context.Context, red Redactor, build func(ctx context.Context) (*http.Request, error)) (Reply, *Failure, error) {
	xctx, cancel := e.withTimeout(ctx)
	defer cancel()
	req, err := build(xctx)
	if err != nil {
		return Reply{}, nil, err
	}
	if e.UserAgent != "" {
		req.Header.Set("User-Agent", e.UserAgent)
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		f := networkFailure(ctx, 0, err, red)
		return Reply{}, &f, nil
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, e.MaxBody+1))
	if err != nil {
		f := networkFailure(ctx, resp.StatusCode, err, red)
		return Reply{}, &f, nil
	}
	rep := Reply{Status: resp.StatusCode, Header: resp.Header, Body: body}
	if int64(len(body)) > e.MaxBody {
		rep.Body, rep.Truncated = body[:e.MaxBody], true
		if rep.OK() {
			return Reply{}, &Failure{
				Class:   ClassResponseTooLarge,
				Status:  resp.StatusCode,
				Message: fmt.Sprintf("response body exceeds %d bytes", e.MaxBody),
			}, nil
		}
	}
	return rep, nil, nil
}

// withTimeout bounds one exchange by e.Timeout.
func (e *Endpoint) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.Timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, e.Timeout)
}

// networkFailure classifies a failed exchange: canceled when the caller's
// context was canceled, timeout for a deadline or a network timeout,
// network otherwise. The message leaves out the method and URL.
func networkFailure(callerCtx context.Context, status int, err error, red Redactor) Failure {
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
	return Failure{Class: class, Status: status, Message: red.Message(msg)}
}

// Problems ParseBase reports.
var (
	ErrBaseNotHTTP  = errors.New("must be an absolute http or https URL")
	ErrBaseHasExtra = errors.New("must not have a query, a fragment or user info")
)

// ParseBase parses an API root: an absolute http or https URL without a
// query, a fragment or user info. Trailing slashes of its path are
// removed. The error is ErrBaseNotHTTP or ErrBaseHasExtra, without the
// URL: the caller names the field and shows the URL scrubbed.
func ParseBase(raw string) (*url.URL, error) {
	base, err := url.Parse(raw)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, ErrBaseNotHTTP
	}
	if base.RawQuery != "" || base.Fragment != "" || base.User != nil {
		return nil, ErrBaseHasExtra
	}
	base.Path = strings.TrimRight(base.Path, "/")
	base.RawPath = ""
	return base, nil
}
