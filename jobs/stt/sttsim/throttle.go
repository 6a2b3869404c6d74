package sttsim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"
)

// admit records the arrival of a submission of scope and decides whether
// it is refused before anything else is looked at: during a cooldown of
// its scope it is answered 429 with the remaining time; otherwise, when
// enter found its scope full (over), 429 over the in-flight limit, which
// starts no cooldown; otherwise the trouble knobs may refuse it (429
// starting a cooldown, 503, 5xx). It returns the arrival's index (for
// finish) and the refusal, if any.
//
// An arrival during an announced cooldown is in flight when its
// X-Admitted-At is not after the announcement, and a violation when it is
// after, absent or unreadable.
func (s *Server) admit(scope Scope, key string, batch bool, admittedHeader string, over bool) (int, *reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.st.Submissions++
	s.st.SubmissionsByScope[scope]++
	if batch {
		s.st.Batches++
	}
	a := Arrival{Scope: scope, IdempotencyKey: key, Batch: batch, ArrivedAt: now, AdmittedAtHeader: admittedHeader}
	if t, err := time.Parse(time.RFC3339Nano, admittedHeader); err == nil {
		a.AdmittedAt = t.UTC()
	}
	idx := len(s.st.Arrivals)
	var rep *reply
	if i, ok := s.cooldownOf[scope]; ok && now.Before(s.st.Cooldowns[i].Deadline) {
		cd := &s.st.Cooldowns[i]
		if cd.Announced() {
			if !a.AdmittedAt.IsZero() && !a.AdmittedAt.After(cd.AnnouncedAt) {
				a.InFlight = true
			} else {
				a.Violation = true
				s.st.Violations = append(s.st.Violations, Violation{
					Scope: scope, IdempotencyKey: key, Batch: batch, ArrivedAt: now,
					AdmittedAt: a.AdmittedAt, AdmittedAtHeader: admittedHeader,
					AnnouncedAt: cd.AnnouncedAt, Deadline: cd.Deadline,
				})
				s.log.LogAttrs(context.Background(), slog.LevelInfo, "sttsim: submission during an announced cooldown",
					slog.String("scope", scope.String()), slog.String("idempotency_key", key),
					slog.Time("announced_at", cd.AnnouncedAt), slog.Time("deadline", cd.Deadline),
					slog.String("x_admitted_at", admittedHeader))
			}
		}
		rep = s.refuseInCooldown(cd, now)
	} else if over {
		a.OverLimit = true
		rep = s.refuseOverLimit(scope, key, now)
	} else {
		rep = s.trouble(scope, key, now)
	}
	s.st.Arrivals = append(s.st.Arrivals, a)
	return idx, rep
}

// finish records the answer of arrival idx and gives back its slot,
// keeping the asynchronous work the answer accepted in flight.
func (s *Server) finish(idx int, sl slot, rep reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(sl, rep.pendingUntil, s.now())
	a := &s.st.Arrivals[idx]
	switch {
	case rep.drop:
		a.Dropped = true
	case !rep.abandoned:
		a.Status = rep.status
	}
}

// refuseInCooldown answers 429 with the time left of cd, in the next form;
// the first parseable header announces cd. Callers hold mu.
func (s *Server) refuseInCooldown(cd *Cooldown, now time.Time) *reply {
	f := s.nextForm()
	value, _ := retryAfterValue(f, now, cd.Deadline, s.malformedTurn)
	if f == FormMalformed {
		s.malformedTurn++
	}
	cd.Answers++
	if f.usable() && !cd.Announced() {
		cd.AnnouncedAt, cd.AnnouncedForm, cd.AnnouncedHeader = now, f, value
	}
	s.st.RateLimited++
	rep := errorReply(http.StatusTooManyRequests, errRateLimited, "rate limit exceeded for this API key and model")
	rep.retryAfter = value
	return &rep
}

// refuseOverLimit answers 429 to a submission that arrived while its scope
// had Config.MaxInFlight in flight, with a Retry-After of
// Config.InFlightRetryAfter in the next form. It starts no cooldown.
// Callers hold mu.
func (s *Server) refuseOverLimit(scope Scope, key string, now time.Time) *reply {
	f := s.nextForm()
	value, _ := retryAfterValue(f, now, now.Add(s.cfg.InFlightRetryAfter), s.malformedTurn)
	if f == FormMalformed {
		s.malformedTurn++
	}
	s.st.RateLimited++
	s.st.OverLimit++
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "sttsim: submission over the in-flight limit",
		slog.String("scope", scope.String()), slog.String("idempotency_key", key),
		slog.Int("max_in_flight", s.cfg.MaxInFlight), slog.String("retry_after", value))
	rep := errorReply(http.StatusTooManyRequests, errRateLimited, "too many concurrent requests")
	rep.retryAfter = value
	return &rep
}

// trouble decides, outside a cooldown, whether a submission is refused by
// the trouble knobs: from Config.Rand, or from the key's own draw when
// Config.TroubleSeed is set. Callers hold mu.
func (s *Server) trouble(scope Scope, key string, now time.Time) *reply {
	chance, form := s.rng.Chance, s.nextForm
	if s.cfg.TroubleSeed != 0 {
		chance, form = s.keyedDraw(key)
	}
	switch {
	case chance(s.cfg.RateLimitShare):
		return s.startCooldown(scope, http.StatusTooManyRequests, form(), now)
	case chance(s.cfg.UnavailableShare):
		return s.startCooldown(scope, http.StatusServiceUnavailable, form(), now)
	case chance(s.cfg.ServerErrorShare):
		return s.serverError()
	}
	return nil
}

// keyedDraw is the draw of key's next submission under
// Config.TroubleSeed: chances and, under FormMixed, the Retry-After form.
// Callers hold mu.
func (s *Server) keyedDraw(key string) (chance func(float64) bool, form func() RetryAfterForm) {
	if s.troubleTurn == nil {
		s.troubleTurn = map[string]uint64{}
	}
	k := s.troubleTurn[key]
	s.troubleTurn[key] = k + 1
	var head [16]byte
	binary.BigEndian.PutUint64(head[:8], s.cfg.TroubleSeed)
	binary.BigEndian.PutUint64(head[8:], k)
	sum := sha256.Sum256(append(head[:], key...))
	rng := rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))
	chance = func(p float64) bool {
		switch {
		case p <= 0:
			return false
		case p >= 1:
			return true
		}
		return rng.Float64() < p
	}
	form = func() RetryAfterForm {
		if s.cfg.RetryAfterForm != FormMixed {
			return s.cfg.RetryAfterForm
		}
		return mixedRotation[rng.IntN(len(mixedRotation))]
	}
	return chance, form
}

// startCooldown answers status (429 or 503) with a Retry-After in form f
// and starts a cooldown of scope,
// except for a 503 that carries no Retry-After. Callers hold mu.
func (s *Server) startCooldown(scope Scope, status int, f RetryAfterForm, now time.Time) *reply {
	deadline := now.Add(s.cfg.Cooldown)
	value, sent := retryAfterValue(f, now, deadline, s.malformedTurn)
	if f == FormMalformed {
		s.malformedTurn++
	}
	var rep reply
	if status == http.StatusTooManyRequests {
		s.st.RateLimited++
		rep = errorReply(status, errRateLimited, "rate limit exceeded for this API key and model")
	} else {
		s.st.Unavailable++
		rep = errorReply(status, errUnavailable, "the service is temporarily unavailable")
	}
	rep.retryAfter = value
	if status == http.StatusServiceUnavailable && !sent {
		return &rep
	}
	cd := Cooldown{
		Scope: scope, Status: status, StartedAt: now, Deadline: deadline,
		Form: f, Header: value, Answers: 1,
	}
	if f.usable() {
		cd.AnnouncedAt, cd.AnnouncedForm, cd.AnnouncedHeader = now, f, value
	}
	s.cooldownOf[scope] = len(s.st.Cooldowns)
	s.st.Cooldowns = append(s.st.Cooldowns, cd)
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "sttsim: cooldown started",
		slog.String("scope", scope.String()), slog.Int("status", status),
		slog.Time("deadline", deadline), slog.String("retry_after", value))
	return &rep
}

// readTrouble decides whether a read (poll, reconcile) is answered 503 or
// 5xx. A 503 on a read carries a Retry-After but starts no cooldown: reads
// have no quota here.
func (s *Server) readTrouble() *reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.rng.Chance(s.cfg.UnavailableShare):
		now := s.now()
		f := s.nextForm()
		value, _ := retryAfterValue(f, now, now.Add(s.cfg.Cooldown), s.malformedTurn)
		if f == FormMalformed {
			s.malformedTurn++
		}
		s.st.Unavailable++
		rep := errorReply(http.StatusServiceUnavailable, errUnavailable, "the service is temporarily unavailable")
		rep.retryAfter = value
		return &rep
	case s.rng.Chance(s.cfg.ServerErrorShare):
		return s.serverError()
	}
	return nil
}

// serverError answers 500, 502 or 504. Callers hold mu.
func (s *Server) serverError() *reply {
	s.st.ServerErrors++
	var rep reply
	switch s.rng.Pick(3) {
	case 0:
		rep = errorReply(http.StatusInternalServerError, errServerError, "internal error")
	case 1:
		rep = errorReply(http.StatusBadGateway, errServerError, "bad gateway: the transcriber did not answer")
	default:
		rep = errorReply(http.StatusGatewayTimeout, errServerError, "gateway timeout: the transcriber took too long")
	}
	return &rep
}

// nextForm is the form of the next 429 or 503 answer. Callers hold mu.
func (s *Server) nextForm() RetryAfterForm {
	if s.cfg.RetryAfterForm != FormMixed {
		return s.cfg.RetryAfterForm
	}
	f := mixedRotation[s.formTurn%len(mixedRotation)]
	s.formTurn++
	return f
}
