package testdb

import (
	"cmp"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Proxy is a TCP proxy in front of the test server, for a test that cuts
// one client's database away mid-run and gives it back, while the test
// itself still reaches the database directly. Cut closes every connection
// through it and refuses new ones (accepted and closed at once, as a
// server that is gone); Restore lets them through again. It is closed when
// the test ends.
type Proxy struct {
	ln     net.Listener
	target string
	url    string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy returns a proxy to the server behind pool, whose URL names
// pool's database through it.
func NewProxy(t testing.TB, pool *pgxpool.Pool) *Proxy {
	t.Helper()
	u, err := url.Parse(URLOf(t, pool))
	if err != nil {
		t.Fatalf("testdb proxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testdb proxy: %v", err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(cmp.Or(u.Hostname(), "127.0.0.1"), "5432")
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	u.Host = ln.Addr().String()
	p.url = u.String()
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// URL is the database's URL through the proxy.
func (p *Proxy) URL() string { return p.url }

// Cut closes every connection through the proxy and refuses new ones
// until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.track(c)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(c) })
	}
}

// track notes c as open through the proxy (p.mu held).
func (p *Proxy) track(c net.Conn) { p.conns[c] = struct{}{} }

// pipe copies between c and a new connection to the server until either
// side closes or the proxy is cut.
func (p *Proxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if _, open := p.conns[c]; !open {
		p.mu.Unlock()
		_ = s.Close()
		return
	}
	p.track(s)
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range [][2]net.Conn{{s, c}, {c, s}} {
		wg.Go(func() {
			_, _ = io.Copy(d[0], d[1])
			_ = d[0].Close()
			_ = d[1].Close()
		})
	}
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
