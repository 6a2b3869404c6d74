package crmsim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/callscribe/callscribe/crm"
)

// serveDeliver answers POST /v1/action-sets: it reads the request, waits
// the latency, handles the delivery and writes the answer (or drops the
// connection). The body is read first: net/http notices a sender that goes
// away only once the body is consumed.
func (s *Server) serveDeliver(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if !s.delay(r.Context()) {
		s.mu.Lock()
		s.st.Cancelled++
		s.mu.Unlock()
		return
	}
	key := r.Header.Get("Idempotency-Key")
	attempt, _ := strconv.Atoi(r.Header.Get("X-Delivery-Attempt"))
	rep := s.deliver(r, key, body, readErr)
	s.mu.Lock()
	s.st.Arrivals = append(s.st.Arrivals, Arrival{
		Key: key, Attempt: attempt, At: s.now(), Status: rep.status, Dropped: rep.drop,
	})
	s.mu.Unlock()
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "crmsim: answered",
		slog.String("idempotency_key", sanitizeKey(key)), slog.Int("attempt", attempt),
		slog.Int("status", rep.status), slog.Bool("dropped", rep.drop))
	s.write(w, rep)
}

// deliver checks a delivery in the protocol's order (token, headers,
// throttling, body, fields, key) and applies it once per key.
func (s *Server) deliver(r *http.Request, key string, body []byte, readErr error) reply {
	s.mu.Lock()
	s.st.Deliveries++
	s.mu.Unlock()

	token, ok := s.authenticate(r)
	if !ok {
		s.mu.Lock()
		s.st.Unauthorized++
		s.mu.Unlock()
		rep := errorReply(http.StatusUnauthorized, errUnauthorized, "missing or unknown token: send Authorization: Bearer <token>")
		rep.header = http.Header{"Www-Authenticate": {`Bearer realm="crm-webhook"`}}
		return rep
	}
	if key == "" {
		return s.invalid(http.StatusBadRequest, "the Idempotency-Key header (tenant_id:call_id:action_version) is required")
	}
	if n, err := strconv.Atoi(r.Header.Get("X-Delivery-Attempt")); err != nil || n < 1 {
		return s.invalid(http.StatusBadRequest, "the X-Delivery-Attempt header must be a whole number, 1 or more")
	}
	if rep := s.throttle(token); rep != nil {
		return *rep
	}
	if readErr != nil {
		return s.invalid(http.StatusBadRequest, fmt.Sprintf("reading the body (at most %d bytes): %v", MaxBodyBytes, readErr))
	}
	set, prob := decodeSet(body)
	if prob != nil {
		return s.invalid(prob.status, prob.message)
	}
	if want := keyOf(set); key != want {
		return s.invalid(http.StatusUnprocessableEntity, fmt.Sprintf("Idempotency-Key %q does not match the body's tenant_id:call_id:action_version %q", key, want))
	}
	return s.apply(key, set, body)
}

// invalid counts and answers a refused request.
func (s *Server) invalid(status int, msg string) reply {
	s.mu.Lock()
	s.st.Invalid++
	s.mu.Unlock()
	return errorReply(status, errInvalidRequest, "%s", msg)
}

// apply applies the set under key, once: the first delivery of a key is
// recorded and answered 201; a later one with the same content is a
// replay, answered 200 with the original id; one with other content is a
// conflict, answered 409.
func (s *Server) apply(key string, set crm.ActionSet, body []byte) reply {
	canon := canonical(set)
	s.mu.Lock()
	if rec, ok := s.byKey[key]; ok {
		if bytes.Equal(rec.canonical, canon) {
			s.st.Replays++
			s.mu.Unlock()
			return reply{status: http.StatusOK, body: successBody{ID: rec.id, AppliedAt: rec.appliedAt.Format(time.RFC3339)}}
		}
		s.st.Conflicts++
		id := rec.id
		s.mu.Unlock()
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "crmsim: idempotency key reused with another body",
			slog.String("idempotency_key", sanitizeKey(key)), slog.String("crm_id", id))
		return errorReply(http.StatusConflict, errIdempotencyKeyReused,
			"this Idempotency-Key was applied with a different body (%s)", id)
	}
	rec := &record{
		key:       key,
		id:        fmt.Sprintf("crm_%d", len(s.order)+1),
		appliedAt: s.now(),
		canonical: canon,
		body:      bytes.Clone(body),
		set:       set,
	}
	s.byKey[key] = rec
	s.order = append(s.order, rec)
	s.st.Applied++
	s.st.ApplyCount[key]++
	s.st.Bodies[key] = rec.body
	drop := s.rng.Chance(s.cfg.DropAfterApplyShare)
	if drop {
		s.st.Drops++
	}
	s.mu.Unlock()

	if s.cfg.OnApply != nil {
		s.cfg.OnApply(key)
	}
	if drop {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "crmsim: dropped the connection after applying",
			slog.String("idempotency_key", sanitizeKey(key)), slog.String("crm_id", rec.id))
		return reply{drop: true}
	}
	return reply{status: http.StatusCreated, body: successBody{ID: rec.id, AppliedAt: rec.appliedAt.Format(time.RFC3339)}}
}

// throttle decides whether a delivery with token is refused before its
// body is read: during the token's cooldown it is answered 429 with the
// time left; otherwise RateLimitShare may refuse it with 429 and start a
// cooldown, and ServerErrorShare with a 5xx.
func (s *Server) throttle(token string) *reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if until, ok := s.cooldownUntil[token]; ok && now.Before(until) {
		return s.rateLimitedLocked(now, until)
	}
	switch {
	case s.rng.Chance(s.cfg.RateLimitShare):
		until := now.Add(s.cfg.Cooldown)
		s.cooldownUntil[token] = until
		s.st.Cooldowns++
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "crmsim: cooldown started",
			slog.String("token", tokenName(token)), slog.Time("until", until))
		return s.rateLimitedLocked(now, until)
	case s.rng.Chance(s.cfg.ServerErrorShare):
		s.st.ServerErrors++
		var rep reply
		switch s.rng.Pick(4) {
		case 0:
			rep = errorReply(http.StatusInternalServerError, errServerError, "internal error")
		case 1:
			rep = errorReply(http.StatusBadGateway, errServerError, "bad gateway: the CRM did not answer")
		case 2:
			rep = errorReply(http.StatusServiceUnavailable, errUnavailable, "the CRM is temporarily unavailable")
			rep.retryAfter = s.retryAfterLocked(now, now.Add(s.cfg.Cooldown))
		default:
			rep = errorReply(http.StatusGatewayTimeout, errServerError, "gateway timeout: the CRM took too long")
		}
		return &rep
	}
	return nil
}

// rateLimitedLocked is a 429 until the deadline. Callers hold mu.
func (s *Server) rateLimitedLocked(now, until time.Time) *reply {
	s.st.RateLimited++
	rep := errorReply(http.StatusTooManyRequests, errRateLimited, "the quota of this integration is spent")
	rep.retryAfter = s.retryAfterLocked(now, until)
	return &rep
}

// retryAfterLocked is the Retry-After for until, in the configured form.
// Callers hold mu.
func (s *Server) retryAfterLocked(now, until time.Time) string {
	v, _ := retryAfterValue(s.cfg.RetryAfterForm, now, until, s.malformedTurn)
	if s.cfg.RetryAfterForm == FormMalformed {
		s.malformedTurn++
	}
	return v
}

// tokenName names a token for logs without revealing it.
func tokenName(t string) string {
	return t[:min(4, len(t)/2)] + "…"
}
