// Package conntest counts the connections a client opens to a test server
// that answers requests in waves of truly concurrent requests: a request
// is answered only once every request of its wave has arrived, so each
// wave has that many connections in use at once, and the next wave shows
// how many of them the client kept for reuse.
package conntest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gateWait bounds how long a request waits for the rest of its wave; a
// wave that never filled up is counted (Server.ShortWaves).
const gateWait = 10 * time.Second

// Server is an httptest server that counts the connections it accepted.
type Server struct {
	URL string

	width    int
	answer   http.HandlerFunc
	newConns atomic.Int64
	short    atomic.Int64

	mu      sync.Mutex
	arrived int
	gate    chan struct{}
}

// Start starts a server whose waves are width requests wide; answer
// writes each request's answer once its wave is complete. The server
// closes when the test ends.
func Start(t testing.TB, width int, answer http.HandlerFunc) *Server {
	t.Helper()
	s := &Server{width: width, answer: answer, gate: make(chan struct{})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.newConns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	gate := s.gate
	s.arrived++
	if s.arrived == s.width {
		close(gate)
	}
	s.mu.Unlock()
	select {
	case <-gate:
	case <-time.After(gateWait):
		s.short.Add(1)
	}
	s.answer(w, r)
}

// Waves sends waves waves of the server's width of concurrent requests
// with send (i: the request's number in its wave), each wave after the
// last has been answered, and returns the connections the server accepted
// during them. The first error of send fails the test.
func (s *Server) Waves(t testing.TB, waves int, send func(ctx context.Context, i int) error) int {
	t.Helper()
	before := s.newConns.Load()
	for wave := range waves {
		s.mu.Lock()
		s.arrived, s.gate = 0, make(chan struct{})
		s.mu.Unlock()
		errs := make(chan error, s.width)
		var wg sync.WaitGroup
		for i := range s.width {
			wg.Go(func() { errs <- send(t.Context(), i) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("wave %d: %v", wave, err)
			}
		}
	}
	return int(s.newConns.Load() - before)
}

// ShortWaves is how many requests were answered without the rest of
// their wave, after waiting gateWait: the client never had the wave's
// width in flight at once.
func (s *Server) ShortWaves() int { return int(s.short.Load()) }

// String describes the server for failure messages.
func (s *Server) String() string {
	return fmt.Sprintf("server %s: %d connections accepted, %d requests answered without their wave", s.URL, s.newConns.Load(), s.short.Load())
}
