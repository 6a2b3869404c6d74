package simserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

var discard = slog.New(slog.DiscardHandler)

func TestServeShutsDownWhenContextIsDone(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Write(w, Answer{Status: http.StatusTeapot, ContentType: "application/json", Body: []byte(`{}`)})
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, discard, "testsim") }()

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("status %d, want 418", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after shutdown: %v, want nil", err)
		}
	case <-time.After(ShutdownGrace + 5*time.Second):
		t.Fatal("Serve did not return after its context was done")
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the listener is still open after Serve returned")
	}
}

func TestServeReportsAClosedListener(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = ln.Close()
	err = Serve(context.Background(), ln, http.NotFoundHandler(), discard, "testsim")
	if err == nil || !strings.HasPrefix(err.Error(), "testsim: serving: ") {
		t.Errorf("Serve on a closed listener: %v, want a testsim: serving error", err)
	}
}

func TestListenAndServeBadAddress(t *testing.T) {
	t.Parallel()
	err := ListenAndServe(context.Background(), "127.0.0.1:-1", http.NotFoundHandler(), discard, "testsim")
	if err == nil || !strings.HasPrefix(err.Error(), "testsim: listening on 127.0.0.1:-1: ") {
		t.Errorf("ListenAndServe on a bad address: %v", err)
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	Write(rec, Answer{
		Status:      http.StatusTooManyRequests,
		ContentType: "application/json",
		RetryAfter:  "30",
		Header:      http.Header{"Content-Type": {"text/html"}, "X-Extra": {"a", "b"}},
		Body:        []byte(`{"error":{}}`),
	})
	if rec.Code != 429 || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Retry-After") != "30" ||
		len(rec.Header().Values("X-Extra")) != 2 || rec.Body.String() != "{\"error\":{}}\n" {
		t.Errorf("written: %d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
	rec = httptest.NewRecorder()
	Write(rec, Answer{Status: 200, ContentType: "application/json", Body: []byte(`{}`)})
	if _, ok := rec.Header()["Retry-After"]; ok {
		t.Error("Retry-After written without a value")
	}
}

func TestHangUpResetsTheConnection(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { HangUp(w) }))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(srv.URL)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("got an answer (%d), want the connection dropped", resp.StatusCode)
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Errorf("error %v, want a reset connection", err)
	}
}

func TestCredentials(t *testing.T) {
	t.Parallel()
	c := NewCredentials([]string{"key-a", "key-b", ""})
	tests := []struct {
		header string
		want   string
		ok     bool
	}{
		{"Bearer key-a", "key-a", true},
		{"bearer key-b", "key-b", true},
		{"BEARER   key-a  ", "key-a", true},
		{"Bearer key-c", "key-c", false},
		{"Bearer ", "", false}, // an empty credential never passes, even if configured
		{"Basic key-a", "", false},
		{"key-a", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		got, ok := c.Authenticate(r)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Authenticate(%q) = %q, %t; want %q, %t", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRandAndScriptedSource(t *testing.T) {
	t.Parallel()
	src := &ScriptedSource{Then: 1<<64 - 1}
	r := NewLockedRand(rand.New(src))
	src.Push(0, 0, 5)
	if !r.Chance(0.5) {
		t.Error("Chance(0.5) with a queued 0 is false")
	}
	src.Reset()
	if r.Chance(0.5) {
		t.Error("Chance(0.5) on Then = max is true")
	}
	src.Push(0)
	if r.Chance(0) || !r.Chance(1) {
		t.Error("Chance(0) or Chance(1) is not certain")
	}
	if got := src.Uint64(); got != 0 {
		t.Errorf("Chance(0) and Chance(1) drew: the queued value is gone (%d)", got)
	}
	if got := r.Pick(4); got != 3 {
		t.Errorf("Pick(4) on max = %d, want 3", got)
	}
	if got := r.Int64N(10); got != 9 {
		t.Errorf("Int64N(10) on max = %d, want 9", got)
	}
	if NewRand() == nil {
		t.Error("NewRand returned nil")
	}
}

func TestCeil(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int64{
		-time.Second: 0, 0: 0, time.Nanosecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 90 * time.Second: 90,
	} {
		if got := CeilSeconds(d); got != want {
			t.Errorf("CeilSeconds(%v) = %d, want %d", d, got, want)
		}
	}
	chicago := time.FixedZone("CST", -6*3600)
	whole := time.Date(2026, 11, 23, 9, 0, 0, 0, chicago)
	if got := CeilSecond(whole); !got.Equal(whole) || got.Location() != time.UTC {
		t.Errorf("CeilSecond(whole second) = %v", got)
	}
	if got := CeilSecond(whole.Add(time.Nanosecond)); !got.Equal(whole.Add(time.Second)) {
		t.Errorf("CeilSecond(+1ns) = %v, want the next second", got)
	}
	if got := CeilSecond(whole).Format(LayoutIMFFixdate); got != "Mon, 23 Nov 2026 15:00:00 GMT" {
		t.Errorf("IMF-fixdate %q", got)
	}
}
