package vendorhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callscribe/callscribe/internal/vendorhttp/conntest"
)

func TestCheckPlainHTTP(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		raw   string
		allow bool
		ok    bool
	}{
		{"https://stt.example.com", false, true},
		{"https://10.0.0.7:8443", false, true},
		{"http://127.0.0.1:8090", false, true},
		{"http://127.9.8.7", false, true},
		{"http://[::1]:8090/api", false, true},
		{"http://localhost:8090", false, true},
		{"http://LocalHost.", false, true},
		{"http://[::ffff:127.0.0.1]:80", false, true},
		{"http://stt.internal:8080", false, false},
		{"http://10.0.0.7", false, false},
		{"http://128.0.0.1", false, false},
		{"http://[::2]", false, false},
		{"http://localhost.example.com", false, false},
		{"http://0.0.0.0:8090", false, false},
		{"http://stt.internal:8080", true, true},
	} {
		base, err := ParseBase(tt.raw)
		if err != nil {
			t.Fatalf("%s: %v", tt.raw, err)
		}
		err = CheckPlainHTTP(base, tt.allow)
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBaseInsecure)) {
			t.Errorf("CheckPlainHTTP(%s, %v) = %v, want ok %v", tt.raw, tt.allow, err, tt.ok)
		}
	}
}

// TestNoRedirects: the 3xx is the answer; its target receives nothing and
// the caller's client is not changed.
func TestNoRedirects(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	e := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
	})
	caller := e.Client
	e.Client = NoRedirects(caller)
	rep, f, err := e.Exchange(context.Background(), red, get(e, "/v1/x"))
	if err != nil || f != nil || rep.Status != http.StatusTemporaryRedirect {
		t.Fatalf("Exchange = %+v, %+v, %v", rep, f, err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("redirect target received %d requests", n)
	}
	if caller.CheckRedirect != nil {
		t.Error("the caller's client was changed")
	}
	if c := NoRedirects(nil); c.CheckRedirect == nil || c.Timeout != time.Duration(0) {
		t.Errorf("NoRedirects(nil) = %+v", c)
	}
}

// TestNoRedirectsKeepsConnectionsAlive: a client without a transport of
// its own keeps a connection per concurrent request for the next ones.
// With http.DefaultTransport's two idle connections per host, each wave of
// 20 concurrent requests would open 18 new ones; the same waves through a
// transport that keeps 2 show the count tells the two apart.
func TestNoRedirectsKeepsConnectionsAlive(t *testing.T) {
	t.Parallel()
	const width, waves = 20, 20
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }
	get := func(c *http.Client, url string) func(ctx context.Context, _ int) error {
		return func(ctx context.Context, _ int) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			return errors.Join(err, resp.Body.Close())
		}
	}

	srv := conntest.Start(t, width, ok)
	if got := srv.Waves(t, waves, get(NoRedirects(nil), srv.URL)); got > 3*width || srv.ShortWaves() > 0 {
		t.Errorf("%d waves of %d concurrent requests opened %d connections, want at most %d (%v)", waves, width, got, 3*width, srv)
	}
	if got := srv.Waves(t, waves, get(NoRedirects(&http.Client{Timeout: time.Minute}), srv.URL)); got > 3*width {
		t.Errorf("a client without a transport: %d waves opened %d connections, want at most %d (%v)", waves, got, 3*width, srv)
	}

	two := http.DefaultTransport.(*http.Transport).Clone()
	two.MaxIdleConnsPerHost = 2
	t.Cleanup(two.CloseIdleConnections)
	other := conntest.Start(t, width, ok)
	if got := other.Waves(t, waves, get(&http.Client{Transport: two}, other.URL)); got <= 3*width || other.ShortWaves() > 0 {
		t.Errorf("through a transport keeping 2 idle connections, %d waves opened %d connections, want more than %d (%v)", waves, got, 3*width, other)
	}
}
