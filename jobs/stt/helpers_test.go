package stt

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testKey is the API key every test adapter uses; no Message or error may
// contain it.
const testKey = "sk-test-K3Y-0123456789abcdefSECRET"

// fixture reads a vendor-shaped body from testdata/stt/<vendor>/<name>.
func fixture(t testing.TB, vendor, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "stt", vendor, name))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return b
}

// capture is one request a fake vendor received.
type capture struct {
	Method           string
	Path             string // escaped
	RawQuery         string
	Header           http.Header
	Body             []byte
	BodyErr          error // the upload broke off
	ContentLength    int64
	TransferEncoding []string
}

// vendor is an httptest server standing in for a speech vendor. It records
// every request (reading its body first) and then calls the handler of the
// request's turn: handlers[i] answers the i-th request, the last one every
// request after.
type vendor struct {
	srv      *httptest.Server
	closing  chan struct{} // closed when the test ends, before the server closes
	mu       sync.Mutex
	got      []capture
	handlers []http.HandlerFunc
}

// newVendor starts a fake vendor that answers with the handlers in turn
// (set v.handlers before the first request when a handler needs v).
func newVendor(t testing.TB, handlers ...http.HandlerFunc) *vendor {
	t.Helper()
	v := &vendor{handlers: handlers, closing: make(chan struct{})}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body) // an aborted upload is the client's business: recorded, not failed
		v.mu.Lock()
		n := len(v.got)
		v.got = append(v.got, capture{
			Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header.Clone(),
			Body: body, BodyErr: err, ContentLength: r.ContentLength, TransferEncoding: r.TransferEncoding,
		})
		v.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		v.handlers[min(n, len(v.handlers)-1)](w, r)
	}))
	t.Cleanup(func() {
		close(v.closing) // release blocked handlers, or Close would wait for them
		v.srv.Close()
	})
	return v
}

// newRawServer starts a fake vendor that leaves the request body to the
// handler, for tests of how the upload arrives.
func newRawServer(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// block answers nothing until the test ends or the client goes away: with
// a short timeout on the client side it makes a timeout without sleeping.
func (v *vendor) block(w http.ResponseWriter, r *http.Request) {
	select {
	case <-v.closing:
	case <-r.Context().Done():
	}
}

// requests returns what the vendor received so far.
func (v *vendor) requests() []capture {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]capture(nil), v.got...)
}

// only returns the single request the vendor received.
func (v *vendor) only(t testing.TB) capture {
	t.Helper()
	got := v.requests()
	if len(got) != 1 {
		t.Fatalf("vendor received %d requests, want 1", len(got))
	}
	if got[0].BodyErr != nil {
		t.Fatalf("vendor could not read the request body: %v", got[0].BodyErr)
	}
	return got[0]
}

// config points an adapter at the fake vendor.
func (v *vendor) config() Config {
	return Config{BaseURL: v.srv.URL, APIKey: testKey, HTTPClient: v.srv.Client()}
}

// answer replies with status, headers given as name, value pairs, and body
// (as JSON unless a Content-Type is among the headers).
func answer(status int, body []byte, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Add(headers[i], headers[i+1])
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

// resetConnection hijacks the connection and closes it with a TCP reset,
// without answering.
func resetConnection(t testing.TB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // close sends RST, not FIN
		}
		_ = conn.Close()
	}
}

// resetMidBody promises a long body, sends part of it and resets.
func resetMidBody(t testing.TB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\": \"tr_1\", \"status\": \"comp")
		_ = buf.Flush()
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// strp returns a pointer to s.
func strp(s string) *string { return &s }

// eqp compares two optional strings.
func eqp(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// show renders an optional string for failure messages.
func show(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return `"` + *p + `"`
}

// checkOutcome asserts the fields every response test checks.
func checkOutcome(t testing.TB, got Response, outcome Outcome, class string, status int) {
	t.Helper()
	if got.Outcome != outcome || got.Class != class || got.HTTPStatus != status {
		t.Fatalf("got outcome %q class %q status %d (message %q), want %q %q %d",
			got.Outcome, got.Class, got.HTTPStatus, got.Message, outcome, class, status)
	}
}

// mustNoErr fails the test on a misuse error where a Response was due.
func mustNoErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// audioFrom returns an OpenAudio that serves b, and a probe that reports
// whether the reader was closed.
func audioFrom(b []byte) (func(context.Context) (io.ReadCloser, error), func() bool) {
	var mu sync.Mutex
	closed := false
	open := func(context.Context) (io.ReadCloser, error) {
		return &closeProbe{Reader: bytes.NewReader(b), onClose: func() {
			mu.Lock()
			closed = true
			mu.Unlock()
		}}, nil
	}
	return open, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return closed
	}
}

type closeProbe struct {
	io.Reader
	onClose func()
}

func (c *closeProbe) Close() error {
	c.onClose()
	return nil
}

// failingAudio returns an OpenAudio whose reader yields head and then err.
func failingAudio(head []byte, err error) func(context.Context) (io.ReadCloser, error) {
	return func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(bytes.NewReader(head), errReader{err})), nil
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// wavBytes is a stand-in for a recording.
var wavBytes = append([]byte("RIFF\x24\x00\x00\x00WAVEfmt "), bytes.Repeat([]byte{0x01, 0x02, 0x03, 0x04}, 2048)...)

// errDisk is an audio source failure.
var errDisk = errors.New("disk on fire")

// assertNoSecrets fails if s carries the API key, the audio URL's query
// or its password.
func assertNoSecrets(t testing.TB, where, s string) {
	t.Helper()
	for _, secret := range []string{testKey, "SECRETSIG", "AKIASECRET", "hunter2", "X-Amz-Signature="} {
		if strings.Contains(s, secret) {
			t.Errorf("%s leaks %q: %s", where, secret, s)
		}
	}
	if len(s) > MessageMaxBytes && where == "Message" {
		t.Errorf("Message is %d bytes, over %d", len(s), MessageMaxBytes)
	}
}

// shortTimeout is long enough for a local round trip, short enough for a
// test that waits for it to expire.
const shortTimeout = 200 * time.Millisecond
