package capacity_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/devservice"
)

// TestLeaseFailOpen kills a throwaway redis-server mid-run: acquisitions
// go ahead uncounted and fast, the warning is rate-limited, and counting
// resumes when a redis-server listens on the same socket again.
func TestLeaseFailOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := devservice.StartRedisServer(ctx, devservice.RedisConfig{})
	if err != nil {
		t.Fatalf("starting a throwaway redis-server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	socket := strings.TrimPrefix(srv.URL(), "unix://")

	clk := newLeaseClock()
	logs := &leaseLogs{}
	r := captest.NewRedis(t, capacity.RedisConfig{URL: srv.URL(), Logger: logs.logger(), Clock: clk, WarnInterval: time.Minute})
	t.Cleanup(func() { _ = r.Close() })
	rdb := r.Client()
	l, err := capacity.New(r, capacity.Config{
		Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 2}, "acme/tts": {Limit: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	req := capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "c"}
	counted, g := l.Acquire(ctx, req)
	if !g.Granted || g.Uncounted {
		t.Fatalf("with Redis up: %+v, want counted", g)
	}
	if _, g := l.Acquire(ctx, req); !g.Granted || g.Uncounted {
		t.Fatalf("second with Redis up: %+v, want counted", g)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const n = 20
	for i := range n {
		_, g := l.Acquire(ctx, req) // the limit (2) would refuse most of these
		if !g.Granted || !g.Uncounted {
			t.Fatalf("acquire %d with Redis down: %+v, want granted uncounted", i, g)
		}
	}
	if per := time.Since(start) / n; per > 100*time.Millisecond {
		t.Fatalf("with Redis down an Acquire took %v on average, want milliseconds", per)
	}
	l.Release(ctx, counted) // noted, not returned
	if res := l.RefreshHeld(ctx); !res.Failed || len(res.Lost) != 0 || len(l.Held()) != 1 {
		t.Fatalf("refresh with Redis down: %+v, want Failed, nothing lost, the lease still held", res)
	}
	l.ReportRefusal(ctx, "acme", capacity.KindSTT, 1)
	if got := l.Uncounted(); got != n+3 {
		t.Fatalf("Uncounted %d, want %d", got, n+3)
	}
	if got := strings.Count(logs.String(), "Redis unreachable"); got != 1 {
		t.Fatalf("%d fail-open warnings within one interval, want 1:\n%s", got, logs)
	}
	clk.Advance(61 * time.Second)
	l.Acquire(ctx, req)
	if got := strings.Count(logs.String(), "Redis unreachable"); got != 2 {
		t.Fatalf("%d fail-open warnings after the interval, want 2", got)
	}

	// Redis comes back on the same socket: counting resumes.
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	server, err := devservice.FindRedisServer()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(server, "--port", "0", "--unixsocket", socket, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	})
	deadline := time.Now().Add(10 * time.Second)
	var lease capacity.Lease
	for {
		lease, g = l.Acquire(ctx, req)
		if !g.Uncounted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("counting did not resume within 10s of restarting Redis")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !g.Granted || g.InUse != 1 {
		t.Fatalf("after restart: %+v, want counted, 1 in use (a fresh server)", g)
	}
	if _, g := l.Acquire(ctx, req); !g.Granted || g.Uncounted || g.InUse != 2 {
		t.Fatalf("second after restart: %+v", g)
	}
	if _, g := l.Acquire(ctx, req); g.Granted {
		t.Fatalf("third after restart: %+v, want refused at limit 2", g)
	}
	// A refresh across providers is one pipeline of EVALSHAs; on the fresh
	// server the script is not loaded yet (NOSCRIPT), so it falls back to EVAL.
	if _, g := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindTTS}); !g.Granted || g.Uncounted {
		t.Fatalf("tts after restart: %+v", g)
	}
	if res := l.RefreshHeld(ctx); res.Failed || len(res.Lost) != 1 || len(res.Refreshed) != 3 {
		t.Fatalf("refresh after restart: %+v, want the pre-crash lease lost and the 3 new ones refreshed", res)
	}
	l.Release(ctx, lease)
	if n, err := rdb.ZCard(ctx, capacity.KeyPrefixDefault+":{acme/stt}:leases").Result(); err != nil || n != 1 {
		t.Fatalf("after release: %d %v, want 1", n, err)
	}
}

// TestLeaseFailOpenOnASilentRedis: a server that accepts the connection
// and never answers (a hung Redis, a black-holed route) costs each call
// about OpTimeout, not the client's own timeouts: the round trip's
// deadline reaches the socket.
func TestLeaseFailOpenOnASilentRedis(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Connections are held open, never answered, and closed once the
	// accept loop has ended (not registered from it: a cleanup added
	// while the test's cleanups run is a race).
	var held []net.Conn
	accepting := make(chan struct{})
	t.Cleanup(func() {
		_ = ln.Close()
		<-accepting
		for _, c := range held {
			_ = c.Close()
		}
	})
	go func() {
		defer close(accepting)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, conn)
		}
	}()
	opt, err := redis.ParseURL("redis://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// Fail-fast options (RedisConfig.URL's) but for the socket timeouts:
	// only the round trip's deadline can end a read.
	opt.MaxRetries, opt.DialerRetries, opt.ContextTimeoutEnabled = -1, 1, true
	opt.ReadTimeout, opt.WriteTimeout = time.Minute, time.Minute
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	const opTimeout = 100 * time.Millisecond
	l, err := capacity.New(captest.NewRedis(t, capacity.RedisConfig{Client: rdb, OpTimeout: opTimeout}), capacity.Config{
		Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lease, g := l.Acquire(context.Background(), capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "c"})
	l.Release(context.Background(), lease)
	if !g.Granted || !g.Uncounted {
		t.Fatalf("grant %+v, want granted uncounted", g)
	}
	// Generous for a loaded machine, far below the client's minute.
	if took := time.Since(start); took > 20*opTimeout {
		t.Fatalf("acquire took %s against a silent Redis, want about OpTimeout (%s)", took, opTimeout)
	}
}
