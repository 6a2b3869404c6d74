package sttsim

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/internal/simserver"
)

func TestRetryAfterValueErrsLate(t *testing.T) {
	t.Parallel()
	now := time.Date(1994, 11, 6, 8, 49, 30, 400_000_000, time.UTC)
	cases := []struct {
		form     RetryAfterForm
		deadline time.Time
		want     string
	}{
		{FormSeconds, now.Add(2 * time.Second), "2"},
		{FormSeconds, now.Add(1500 * time.Millisecond), "2"},
		{FormSeconds, now.Add(time.Nanosecond), "1"},
		{FormSeconds, now.Add(17 * time.Second), "17"},
		{FormIMFFixdate, now.Add(6600 * time.Millisecond), "Sun, 06 Nov 1994 08:49:37 GMT"},
		{FormIMFFixdate, time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC), "Sun, 06 Nov 1994 08:49:37 GMT"},
		{FormRFC850, now.Add(6600 * time.Millisecond), "Sunday, 06-Nov-94 08:49:37 GMT"},
		{FormASCTime, now.Add(6600 * time.Millisecond), "Sun Nov  6 08:49:37 1994"},
		{FormIMFFixdate, time.Date(1994, 11, 6, 9, 49, 36, 1, time.FixedZone("CET", 3600)), "Sun, 06 Nov 1994 08:49:37 GMT"},
	}
	for _, c := range cases {
		got, ok := retryAfterValue(c.form, now, c.deadline, 0)
		if !ok || got != c.want {
			t.Errorf("%s for %v: %q, want %q", c.form, c.deadline, got, c.want)
		}
	}
	if got, ok := retryAfterValue(FormNone, now, now.Add(time.Second), 0); ok || got != "" {
		t.Errorf("none: %q, %v", got, ok)
	}
	for turn := range malformedValues {
		got, ok := retryAfterValue(FormMalformed, now, now.Add(time.Second), turn)
		if !ok || got != malformedValues[turn] {
			t.Errorf("malformed turn %d: %q", turn, got)
		}
		if _, err := strconv.ParseUint(got, 10, 64); err == nil {
			t.Errorf("malformed %q is valid delay-seconds", got)
		}
		if _, err := http.ParseTime(got); err == nil {
			t.Errorf("malformed %q is a valid HTTP-date", got)
		}
	}
}

// TestRetryAfterForms checks the header each form puts on a 429 and a 503
// that start a cooldown, parsed back as a client would: delay-seconds with
// strconv, dates with net/http.
func TestRetryAfterForms(t *testing.T) {
	t.Parallel()
	for _, form := range []RetryAfterForm{FormSeconds, FormIMFFixdate, FormRFC850, FormASCTime, FormNone, FormMalformed} {
		for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
			src := newScriptedSource()
			cfg := Config{RetryAfterForm: form, Cooldown: 90 * time.Second, Rand: rand.New(src)}
			if status == http.StatusTooManyRequests {
				cfg.RateLimitShare = 0.5
			} else {
				cfg.UnavailableShare = 0.5
			}
			b := setup(t, cfg)
			src.Push(yes)
			resp, data := b.submit("k", remoteBody(1))
			typ := errRateLimited
			if status == http.StatusServiceUnavailable {
				typ = errUnavailable
			}
			wantError(t, resp, data, status, typ)

			deadline := epoch.Add(90 * time.Second)
			values := resp.Header.Values("Retry-After")
			st := b.sim.Stats()
			switch form {
			case FormNone:
				if len(values) != 0 {
					t.Errorf("%s %d: Retry-After %q, want none", form, status, values)
				}
			case FormMalformed:
				if len(values) != 1 || values[0] != malformedValues[0] {
					t.Errorf("%s %d: Retry-After %q, want %q", form, status, values, malformedValues[0])
				}
			case FormSeconds:
				n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
				if err != nil || n != 90 {
					t.Errorf("%s %d: Retry-After %q, want 90", form, status, values)
				}
			default:
				at, err := http.ParseTime(resp.Header.Get("Retry-After"))
				if err != nil || !at.Equal(simserver.CeilSecond(deadline)) || at.Before(deadline) {
					t.Errorf("%s %d: Retry-After %q parses to %v, %v; want %v", form, status, values, at, err, simserver.CeilSecond(deadline))
				}
			}

			// A 503 without a header starts no cooldown; everything else does.
			wantCooldown := status != http.StatusServiceUnavailable || form != FormNone
			if got := len(st.Cooldowns) == 1; got != wantCooldown {
				t.Fatalf("%s %d: cooldowns %+v, want one: %v", form, status, st.Cooldowns, wantCooldown)
			}
			if wantCooldown {
				cd := st.Cooldowns[0]
				header := resp.Header.Get("Retry-After")
				if cd.Status != status || cd.Form != form || cd.Header != header || !cd.Deadline.Equal(deadline) ||
					!cd.StartedAt.Equal(epoch) || cd.Announced() != form.usable() || cd.Answers != 1 {
					t.Errorf("%s %d: cooldown %+v", form, status, cd)
				}
				if form.usable() && (!cd.AnnouncedAt.Equal(epoch) || cd.AnnouncedHeader != header || cd.AnnouncedForm != form) {
					t.Errorf("%s %d: announcement %+v", form, status, cd)
				}
			}
			// The next submission is refused during a cooldown, accepted otherwise.
			resp, data = b.submit("k2", remoteBody(2))
			if wantCooldown {
				wantError(t, resp, data, http.StatusTooManyRequests, errRateLimited)
			} else {
				wantStatus(t, resp, data, http.StatusOK)
			}
		}
	}
}

// TestRetryAfterMixed checks that FormMixed rotates through the six forms,
// one per 429 answer, and that a cooldown counts as announced from its
// first readable header.
func TestRetryAfterMixed(t *testing.T) {
	t.Parallel()
	src := newScriptedSource()
	b := setup(t, Config{RetryAfterForm: FormMixed, RateLimitShare: 0.5, Cooldown: time.Minute, Rand: rand.New(src)})
	src.Push(yes)
	var got []string
	for i := range 7 {
		b.clock.Advance(time.Second)
		resp, _ := b.submit("k"+strconv.Itoa(i), remoteBody(1))
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("answer %d: status %d", i, resp.StatusCode)
		}
		got = append(got, resp.Header.Get("Retry-After"))
	}
	// Started at epoch+1s, deadline epoch+61s; answers at epoch+1s..+7s.
	deadline := simserver.CeilSecond(epoch.Add(61 * time.Second))
	checks := []func(string) bool{
		func(v string) bool { return v == "60" },
		func(v string) bool { return v == deadline.Format(http.TimeFormat) },
		func(v string) bool {
			at, err := http.ParseTime(v)
			return err == nil && at.Equal(deadline) && strings.HasPrefix(v, "Sunday, ")
		},
		func(v string) bool {
			at, err := http.ParseTime(v)
			return err == nil && at.Equal(deadline) && v[3] == ' '
		},
		func(v string) bool { return v == "" },
		func(v string) bool { return v == malformedValues[0] },
		func(v string) bool { return v == "54" }, // rounded up from 54.75
	}
	for i, ok := range checks {
		if !ok(got[i]) {
			t.Errorf("answer %d: Retry-After %q", i, got[i])
		}
	}
	st := b.sim.Stats()
	if len(st.Cooldowns) != 1 || st.Cooldowns[0].Answers != 7 || st.RateLimited != 7 {
		t.Fatalf("stats %+v", st)
	}

	// A cooldown that starts silent is announced by its first readable
	// header; what arrived before that is no violation.
	b.clock.Advance(time.Hour)
	for i := range 3 { // turn the rotation to "none"
		src.Push(yes)
		b.submit("turn"+strconv.Itoa(i), remoteBody(1))
		b.clock.Advance(time.Hour)
	}
	src.Push(yes)
	start := b.clock.Now()
	resp, _ := b.submit("silent-start", remoteBody(1)) // none: starts a cooldown nobody is told about
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("want a silent 429, got %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	b.clock.Advance(time.Second)
	resp, _ = b.submit("early", remoteBody(1)) // malformed
	if resp.Header.Get("Retry-After") != malformedValues[1] {
		t.Fatalf("want the second malformed value, got %q", resp.Header.Get("Retry-After"))
	}
	b.clock.Advance(time.Second)
	announced := b.clock.Now()
	resp, _ = b.submit("told", remoteBody(1)) // seconds: the announcement
	if resp.Header.Get("Retry-After") != "58" {
		t.Fatalf("want 58, got %q", resp.Header.Get("Retry-After"))
	}
	b.clock.Advance(time.Second)
	b.submit("late", remoteBody(1))

	st = b.sim.Stats()
	cd := st.Cooldowns[len(st.Cooldowns)-1]
	if !cd.StartedAt.Equal(start) || cd.Form != FormNone || !cd.AnnouncedAt.Equal(announced) ||
		cd.AnnouncedForm != FormSeconds || cd.AnnouncedHeader != "58" || cd.Answers != 4 {
		t.Errorf("cooldown %+v", cd)
	}
	var keys []string
	for _, v := range st.Violations {
		keys = append(keys, v.IdempotencyKey)
	}
	// k1..k6 arrived after the first cooldown's announcement without
	// X-Admitted-At; of the silent cooldown, only "late" did.
	want := []string{"k1", "k2", "k3", "k4", "k5", "k6", "late"}
	if len(keys) != len(want) {
		t.Fatalf("violations %v, want %v", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Errorf("violations %v, want %v", keys, want)
			break
		}
	}
}
