package vendorhttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// serve starts a server with h and returns an Endpoint on it.
func serve(t *testing.T, h http.HandlerFunc) *Endpoint {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	base, err := ParseBase(srv.URL + "/api/")
	if err != nil {
		t.Fatal(err)
	}
	return &Endpoint{Client: srv.Client(), Base: base, Timeout: 5 * time.Second, MaxBody: 16, UserAgent: "callscribe-test/1"}
}

// get builds a GET of path on e.
func get(e *Endpoint, path string) func(ctx context.Context) (*http.Request, error) {
	return func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, e.URL(path, nil), nil)
	}
}

var red = NewRedactor(200, "sk-secret")

func TestExchangeReply(t *testing.T) {
	t.Parallel()
	var gotUA, gotPath string
	e := serve(t, func(w http.ResponseWriter, r *http.Request) {
		gotUA, gotPath = r.UserAgent(), r.URL.Path
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("0123456789abcdef")) // exactly MaxBody
	})
	rep, f, err := e.Exchange(context.Background(), red, get(e, "/v1/x"))
	if err != nil || f != nil {
		t.Fatalf("Exchange: failure %+v, err %v", f, err)
	}
	if rep.Status != 202 || string(rep.Body) != "0123456789abcdef" || rep.Truncated || !rep.OK() || rep.Header.Get("Retry-After") != "7" {
		t.Errorf("reply %+v", rep)
	}
	if gotUA != "callscribe-test/1" || gotPath != "/api/v1/x" {
		t.Errorf("request: User-Agent %q, path %q", gotUA, gotPath)
	}
}

func TestExchangeBodyOverMaxBody(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status  int
		failure bool
	}{{200, true}, {201, true}, {500, false}, {429, false}} {
		e := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tt.status)
			_, _ = w.Write([]byte(strings.Repeat("x", 100)))
		})
		rep, f, err := e.Exchange(context.Background(), red, get(e, "/"))
		if err != nil {
			t.Fatal(err)
		}
		if tt.failure {
			if f == nil || f.Class != ClassResponseTooLarge || f.Status != tt.status || f.Message != "response body exceeds 16 bytes" {
				t.Errorf("%d with a large body: failure %+v, want response_too_large", tt.status, f)
			}
			continue
		}
		if f != nil || rep.Status != tt.status || len(rep.Body) != 16 || !rep.Truncated {
			t.Errorf("%d with a large body: reply %+v failure %+v, want the body cut to 16 bytes", tt.status, rep, f)
		}
	}
}

func TestExchangeFailures(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	slow := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	slow.Timeout = 50 * time.Millisecond

	dropped := serve(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})

	midBody := serve(t, func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234")
		_ = buf.Flush()
		_ = conn.Close()
	})

	// A closed listener: the connection is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + ln.Addr().String() + "/?key=sk-secret"
	_ = ln.Close()
	refused := &Endpoint{Client: &http.Client{}, Base: mustParse(t, "http://"+ln.Addr().String()), MaxBody: 16}

	canceledCtx, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name   string
		e      *Endpoint
		ctx    context.Context
		build  func(ctx context.Context) (*http.Request, error)
		class  string
		status int
	}{
		{"timeout", slow, context.Background(), get(slow, "/"), ClassTimeout, 0},
		{"dropped connection", dropped, context.Background(), get(dropped, "/"), ClassNetwork, 0},
		{"dropped mid-body", midBody, context.Background(), get(midBody, "/"), ClassNetwork, 200},
		{"refused", refused, context.Background(), func(ctx context.Context) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodGet, refusedURL, nil)
		}, ClassNetwork, 0},
		{"canceled", dropped, canceledCtx, get(dropped, "/"), ClassCanceled, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, f, err := tt.e.Exchange(tt.ctx, red, tt.build)
			if err != nil {
				t.Fatal(err)
			}
			if f == nil {
				t.Fatalf("reply %+v, want a failure", rep)
			}
			if f.Class != tt.class || f.Status != tt.status {
				t.Errorf("failure %+v, want class %s status %d", f, tt.class, tt.status)
			}
			if strings.Contains(f.Message, "sk-secret") || strings.Contains(f.Message, "GET ") || f.Message == "" {
				t.Errorf("message %q: want the error without method, URL or secret", f.Message)
			}
		})
	}
}

func TestExchangeBuildError(t *testing.T) {
	t.Parallel()
	e := &Endpoint{Client: &http.Client{}, Base: mustParse(t, "http://127.0.0.1:1"), MaxBody: 16}
	boom := errors.New("boom")
	_, f, err := e.Exchange(context.Background(), red, func(context.Context) (*http.Request, error) { return nil, boom })
	if !errors.Is(err, boom) || f != nil {
		t.Errorf("failure %+v err %v, want build's error", f, err)
	}
}

func TestEndpointURL(t *testing.T) {
	t.Parallel()
	e := &Endpoint{Base: mustParse(t, "https://api.test/v2/")}
	if got := e.URL("/jobs/a%2Fb", nil); got != "https://api.test/v2/jobs/a%2Fb" {
		t.Errorf("URL = %s", got)
	}
	if got := e.URL("/jobs", url.Values{"key": {"a b"}, "n": {"1"}}); got != "https://api.test/v2/jobs?key=a+b&n=1" {
		t.Errorf("URL with query = %s", got)
	}
}

func TestParseBase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw, want string
		err       error
	}{
		{"https://api.test", "https://api.test", nil},
		{"http://stt.internal:8080/api//", "http://stt.internal:8080/api", nil},
		{"https://api.test/a%2Fb/", "https://api.test/a/b", nil},
		{"ftp://api.test", "", ErrBaseNotHTTP},
		{"api.test/v1", "", ErrBaseNotHTTP},
		{"https://", "", ErrBaseNotHTTP},
		{"::", "", ErrBaseNotHTTP},
		{"https://api.test/?key=1", "", ErrBaseHasExtra},
		{"https://api.test/#x", "", ErrBaseHasExtra},
		{"https://u:p@api.test/", "", ErrBaseHasExtra},
	}
	for _, tt := range tests {
		u, err := ParseBase(tt.raw)
		if !errors.Is(err, tt.err) {
			t.Errorf("ParseBase(%q) error %v, want %v", tt.raw, err, tt.err)
			continue
		}
		if err == nil && u.String() != tt.want {
			t.Errorf("ParseBase(%q) = %s, want %s", tt.raw, u, tt.want)
		}
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := ParseBase(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
