package connector

import (
	"bytes"
	"encoding/json"
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

	"github.com/callscribe/callscribe/crm"
)

// testToken is the token every test target uses; no Message or error may
// contain it.
const testToken = "crm-tok!K3Y/0123456789abcdef+SECRET" // "!" and "/" as in Salesforce and base64 tokens

// fixture reads a CRM-shaped body from testdata/crm/<vendor>/<name>.
func fixture(t testing.TB, vendor, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "crm", vendor, name))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return b
}

// compactJSON is b without insignificant white space.
func compactJSON(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact: %v", err)
	}
	return buf.Bytes()
}

// fixedSet is the protocol's example action set.
func fixedSet() crm.ActionSet {
	cst := time.FixedZone("", -6*3600)
	return crm.ActionSet{
		TenantID:        "t1",
		CallID:          "call-42",
		ActionVersion:   1,
		RecordingSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		CommittedAt:     time.Date(2026, 11, 29, 17, 4, 5, 0, time.UTC),
		Actions: []crm.Action{
			{Kind: crm.KindCallNote, Text: "Caller asked for the Q1 rate sheet for Chicago to Dallas and moved the PO-5512 pickup to the morning."},
			{Kind: crm.KindRateSheetPromised, Lanes: []string{"Chicago to Dallas"}, Due: "2026-12-01"},
			{Kind: crm.KindPickupWindowChange, ShipmentRef: "PO-5512", Window: &crm.Window{
				Start: time.Date(2026, 12, 2, 8, 0, 0, 0, cst),
				End:   time.Date(2026, 12, 2, 12, 0, 0, 0, cst),
			}},
			{Kind: crm.KindNextCall, Date: "2026-12-04"},
		},
	}
}

// delivery is the first attempt of the fixed set.
func delivery() Delivery { return Delivery{Set: fixedSet(), Attempt: 1} }

// capture is one request a fake CRM received.
type capture struct {
	Method string
	Path   string // escaped
	Header http.Header
	Body   []byte
}

// fakeCRM is an httptest server standing in for a CRM. It records every
// request and answers it with the handler of its turn: handlers[i]
// answers the i-th request, the last one every request after. byPath,
// when set, picks the handlers by path instead.
type fakeCRM struct {
	srv      *httptest.Server
	closing  chan struct{} // closed when the test ends, before the server closes
	mu       sync.Mutex
	got      []capture
	handlers []http.HandlerFunc
	byPath   map[string]http.HandlerFunc
}

func newFakeCRM(t testing.TB, handlers ...http.HandlerFunc) *fakeCRM {
	t.Helper()
	f := &fakeCRM{handlers: handlers, closing: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.got)
		f.got = append(f.got, capture{Method: r.Method, Path: r.URL.EscapedPath(), Header: r.Header.Clone(), Body: body})
		h := f.byPath[r.URL.Path]
		f.mu.Unlock()
		if h == nil {
			h = f.handlers[min(n, len(f.handlers)-1)]
		}
		h(w, r)
	}))
	t.Cleanup(func() {
		close(f.closing) // release blocked handlers, or Close would wait for them
		f.srv.Close()
	})
	return f
}

// requests returns what the fake received so far.
func (f *fakeCRM) requests() []capture {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]capture(nil), f.got...)
}

// config points a target of kind at the fake.
func (f *fakeCRM) config(kind string) Config {
	return Config{Kind: kind, BaseURL: f.srv.URL, Token: testToken, HTTPClient: f.srv.Client()}
}

// target builds a target of kind against the fake.
func (f *fakeCRM) target(t testing.TB, kind string) Target {
	t.Helper()
	tg, err := New(f.config(kind))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tg
}

// block answers nothing until the test ends or the client goes away.
func (f *fakeCRM) block(w http.ResponseWriter, r *http.Request) {
	select {
	case <-f.closing:
	case <-r.Context().Done():
	}
}

// answer replies with status, headers given as name, value pairs, and
// body (as JSON unless a Content-Type is among the headers).
func answer(status int, body []byte, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Add(headers[i], headers[i+1])
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

// hijack takes over the connection and hands it to f.
func hijack(t testing.TB, f func(conn net.Conn, buf io.Writer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		f(conn, buf)
		_ = buf.Flush()
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // close sends RST, not FIN
		}
		_ = conn.Close()
	}
}

// resetConnection closes the connection with a TCP reset, without
// answering.
func resetConnection(t testing.TB) http.HandlerFunc {
	return hijack(t, func(net.Conn, io.Writer) {})
}

// garbage answers bytes that are not HTTP.
func garbage(t testing.TB) http.HandlerFunc {
	return hijack(t, func(_ net.Conn, w io.Writer) {
		_, _ = io.WriteString(w, "\x00\x01 this is not HTTP at all\r\n\r\n")
	})
}

// resetMidBody promises a long success body, sends part of it and resets.
func resetMidBody(t testing.TB) http.HandlerFunc {
	return hijack(t, func(_ net.Conn, w io.Writer) {
		_, _ = io.WriteString(w, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\": \"crm_")
	})
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
func checkOutcome(t testing.TB, got Result, outcome Outcome, class string, status int) {
	t.Helper()
	if got.Outcome != outcome || got.Class != class || got.HTTPStatus != status {
		t.Fatalf("got outcome %q class %q status %d (message %q), want %q %q %d",
			got.Outcome, got.Class, got.HTTPStatus, got.Message, outcome, class, status)
	}
}

// mustNoErr fails the test on a misuse error where a Result was due.
func mustNoErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// assertNoSecrets fails if s carries the token or URL credentials.
func assertNoSecrets(t testing.TB, where, s string) {
	t.Helper()
	for _, secret := range []string{testToken, "SECRET", "hunter2", "sig=SIG"} {
		if strings.Contains(s, secret) {
			t.Errorf("%s leaks %q: %s", where, secret, s)
		}
	}
	if where == "Message" && len(s) > MessageMaxBytes {
		t.Errorf("Message is %d bytes, over %d", len(s), MessageMaxBytes)
	}
}

// shortTimeout is long enough for a local round trip, short enough for a
// test that waits for it to expire.
const shortTimeout = 200 * time.Millisecond

// fixdate is an IMF-fixdate Retry-After.
const fixdate = "Sun, 06 Nov 1994 08:49:37 GMT"
