package sttsim

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPropertyViolations drives one scope with random interleavings of
// clock steps, admissions, deliveries and refusal decisions, and checks the
// violation accounting from both sides:
//
//   - honest clients share what any of them learns from a readable
//     Retry-After (as callscribe's workers share the scope deadline in the
//     ledger), admit a request only at or after that deadline, stamp it
//     with X-Admitted-At, and deliver it any time later: they never cause a
//     violation, even when their request was already in flight when a
//     cooldown was announced;
//   - a rogue request admitted after the announcement of the current
//     cooldown (or that does not say when), arriving before its deadline,
//     is always exactly one violation.
//
// Along the way a model of the scope's cooldown and in-flight count
// (asynchronous transcriptions until ready, against Config.MaxInFlight)
// predicts every answer's status, which arrivals are over the limit, the
// in-flight count and its peak.
func TestPropertyViolations(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		clock := newClock()
		src := newScriptedSource()
		form := rapid.SampledFrom([]RetryAfterForm{FormSeconds, FormIMFFixdate, FormRFC850, FormASCTime, FormNone, FormMalformed, FormMixed}).Draw(rt, "form")
		cooldown := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(10*time.Second)).Draw(rt, "cooldown"))
		maxInFlight := rapid.IntRange(0, 3).Draw(rt, "maxInFlight")
		processing := time.Duration(rapid.Int64Range(0, int64(10*time.Second)).Draw(rt, "processing"))
		inFlightRetry := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(5*time.Second)).Draw(rt, "inFlightRetryAfter"))
		sim, err := New(Config{
			Clock: clock, Rand: rand.New(src), RetryAfterForm: form, Cooldown: cooldown,
			RateLimitShare: 0.5, UnavailableShare: 0.5, AsyncShare: 0.5, ProcessingTime: processing,
			MaxInFlight: maxInFlight, InFlightRetryAfter: inFlightRetry,
		})
		if err != nil {
			rt.Fatal(err)
		}
		scope := Scope{APIKey: APIKeyDefault, Model: ModelDefault}

		// The model of the scope, from the server's side.
		var (
			cooldownUntil time.Time   // the deadline of the scope's cooldown
			readyAt       []time.Time // asynchronous transcriptions in flight
			overLimit     int
			peak          int
		)
		// expect predicts the answer to a submission arriving now whose
		// random draws, if the server makes them, come out as decision
		// (0: 429, 1: 503, 2: 200, 3: 202), and returns whether it is
		// over the limit and the status; settle updates the model with
		// the answer.
		expect := func(decision int) (bool, int) {
			now := clock.Now()
			live := readyAt[:0]
			for _, r := range readyAt {
				if now.Before(r) {
					live = append(live, r)
				}
			}
			readyAt = live
			over := maxInFlight > 0 && len(readyAt) >= maxInFlight
			if !over {
				peak = max(peak, len(readyAt)+1)
			}
			switch {
			case now.Before(cooldownUntil):
				return false, http.StatusTooManyRequests
			case over:
				return true, http.StatusTooManyRequests
			}
			return false, []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusOK, http.StatusAccepted}[decision]
		}
		settle := func(rt *rapid.T, rec *httptest.ResponseRecorder, over bool, status int) {
			now := clock.Now()
			if rec.Code != status {
				rt.Fatalf("answered %d, want %d (over the limit: %v): %s", rec.Code, status, over, rec.Body)
			}
			switch {
			case over:
				overLimit++
			case !now.Before(cooldownUntil) && (status == http.StatusTooManyRequests ||
				status == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") != ""):
				cooldownUntil = now.Add(cooldown)
			case status == http.StatusAccepted && processing > 0:
				readyAt = append(readyAt, now.Add(processing))
			}
			st := sim.Stats()
			if a := st.Arrivals[len(st.Arrivals)-1]; a.OverLimit != over {
				rt.Fatalf("arrival %+v, want over the limit: %v", a, over)
			}
			if st.OverLimit != overLimit || st.MaxInFlightSeen[scope] != peak || st.InFlight[scope] != len(readyAt) {
				rt.Fatalf("over the limit %d, peak %d, in flight %d; want %d, %d, %d",
					st.OverLimit, st.MaxInFlightSeen[scope], st.InFlight[scope], overLimit, peak, len(readyAt))
			}
			if maxInFlight > 0 && peak > maxInFlight {
				rt.Fatalf("peak %d over the limit %d", peak, maxInFlight)
			}
			if len(st.Cooldowns) > 0 && !st.Cooldowns[len(st.Cooldowns)-1].Deadline.Equal(cooldownUntil) {
				rt.Fatalf("cooldown %+v, the model's deadline %v", st.Cooldowns[len(st.Cooldowns)-1], cooldownUntil)
			}
		}

		type pending struct {
			key        string
			admittedAt time.Time
		}
		var (
			known    time.Time // the shared deadline honest clients learned
			inFlight []pending
			seq      int
		)
		send := func(key string, admitted string) *httptest.ResponseRecorder {
			body, _ := json.Marshal(remoteBody(byte(seq)))
			req := httptest.NewRequest(http.MethodPost, "/v1/transcriptions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+APIKeyDefault)
			req.Header.Set("Idempotency-Key", key)
			if admitted != "" {
				req.Header.Set("X-Admitted-At", admitted)
			}
			rec := httptest.NewRecorder()
			sim.Handler().ServeHTTP(rec, req)
			src.Reset()
			return rec
		}
		learn := func(rec *httptest.ResponseRecorder) {
			if rec.Code != http.StatusTooManyRequests && rec.Code != http.StatusServiceUnavailable {
				return
			}
			v := rec.Header().Get("Retry-After")
			var until time.Time
			if n, err := strconv.ParseUint(v, 10, 32); err == nil {
				until = clock.Now().Add(time.Duration(n) * time.Second)
			} else if at, err := http.ParseTime(v); err == nil {
				until = at
			}
			if until.After(known) {
				known = until
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"advance": func(rt *rapid.T) {
				clock.Advance(time.Duration(rapid.Int64Range(1, int64(3*time.Second)).Draw(rt, "step")))
			},
			"admit": func(rt *rapid.T) {
				if clock.Now().Before(known) {
					rt.Skip("the scope is deferred")
				}
				seq++
				inFlight = append(inFlight, pending{key: "honest-" + strconv.Itoa(seq), admittedAt: clock.Now()})
			},
			"deliver": func(rt *rapid.T) {
				if len(inFlight) == 0 {
					rt.Skip("nothing in flight")
				}
				i := rapid.IntRange(0, len(inFlight)-1).Draw(rt, "which")
				p := inFlight[i]
				inFlight = append(inFlight[:i], inFlight[i+1:]...)
				// What the server decides if it draws: 429, 503, accept
				// (200) or accept asynchronously (202).
				decision := rapid.IntRange(0, 3).Draw(rt, "decision")
				switch decision {
				case 0:
					src.Push(yes)
				case 1:
					src.Push(no, yes)
				case 3:
					src.Push(no, no, yes)
				}
				over, status := expect(decision)
				before := len(sim.Stats().Violations)
				rec := send(p.key, p.admittedAt.Format(time.RFC3339Nano))
				if after := sim.Stats().Violations; len(after) != before {
					rt.Fatalf("honest %s admitted at %v is a violation: %+v", p.key, p.admittedAt, after[before:])
				}
				settle(rt, rec, over, status)
				learn(rec)
			},
			"rogue": func(rt *rapid.T) {
				st := sim.Stats()
				now := clock.Now()
				if len(st.Cooldowns) == 0 {
					rt.Skip("no cooldown yet")
				}
				cd := st.Cooldowns[len(st.Cooldowns)-1]
				if !cd.Announced() || !cd.AnnouncedAt.Before(now) || !now.Before(cd.Deadline) {
					rt.Skip("no announced cooldown running")
				}
				header := ""
				var admitted time.Time
				if rapid.Bool().Draw(rt, "saysWhen") {
					admitted = cd.AnnouncedAt.Add(time.Duration(rapid.Int64Range(1, int64(now.Sub(cd.AnnouncedAt))).Draw(rt, "admittedAfter")))
					header = admitted.Format(time.RFC3339Nano)
				}
				seq++
				key := "rogue-" + strconv.Itoa(seq)
				over, status := expect(2)
				rec := send(key, header)
				if rec.Code != http.StatusTooManyRequests {
					rt.Fatalf("rogue answered %d during a cooldown", rec.Code)
				}
				settle(rt, rec, over, status)
				after := sim.Stats().Violations
				if len(after) != len(st.Violations)+1 {
					rt.Fatalf("rogue admitted at %v (announced %v, deadline %v) made %d violations, want 1",
						admitted, cd.AnnouncedAt, cd.Deadline, len(after)-len(st.Violations))
				}
				v := after[len(after)-1]
				if v.IdempotencyKey != key || !v.AdmittedAt.Equal(admitted) || !v.AnnouncedAt.Equal(cd.AnnouncedAt) ||
					!v.Deadline.Equal(cd.Deadline) || !v.ArrivedAt.Equal(now) {
					rt.Fatalf("violation %+v", v)
				}
			},
		})
	})
}
