package crmsim

import (
	"net/http"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// TestDateFromClock: every answer's Date is Config.Clock's now, not the
// real clock's, so that a sender measuring an IMF-fixdate Retry-After
// against it waits what the simulator meant, whatever its own clock says.
func TestDateFromClock(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RateLimitShare: 1, RetryAfterForm: FormIMFFixdate})
	wantDate := "Sun, 29 Nov 2026 17:04:06 GMT" // epoch rounded down
	a := b.post(goldenBody(t))
	if a.Status != 429 || a.Header.Get("Date") != wantDate {
		t.Fatalf("%d Date %q, want 429 %q", a.Status, a.Header.Get("Date"), wantDate)
	}
	// Retry-After 17:04:09 (the 2 s cooldown rounded up) against the Date:
	// 3 s on any sender's clock.
	for _, skew := range []time.Duration{-5 * time.Second, 0, 5 * time.Second} {
		p := retryafter.Policy{Clock: clock.NewStub(epoch.Add(skew))}
		d := p.DecideFor(a.Header.Get("Retry-After"), true, a.Header.Get("Date"), 0)
		if d.Delay != 3*time.Second || d.DateReference != retryafter.ReferenceDateHeader {
			t.Errorf("sender clock %v off: %v", skew, d)
		}
	}

	// Other answers too: a 201, a 401, a 404, after the clock moved.
	b = setup(t, Config{})
	b.clock.Advance(time.Hour)
	wantDate = "Sun, 29 Nov 2026 18:04:06 GMT"
	for _, c := range []struct {
		name string
		do   func() answer
		want int
	}{
		{"201", func() answer { return b.post(goldenBody(t)) }, http.StatusCreated},
		{"401", func() answer { return b.post(goldenBody(t), header{"Authorization", "Bearer nope"}) }, http.StatusUnauthorized},
		{"404", func() answer {
			resp, err := b.client.Get(b.ts.URL + "/v2/nothing")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			return answer{Status: resp.StatusCode, Header: resp.Header}
		}, http.StatusNotFound},
	} {
		a := c.do()
		if got := a.Header.Values("Date"); a.Status != c.want || len(got) != 1 || got[0] != wantDate {
			t.Errorf("%s: %d Date %q, want %d %q", c.name, a.Status, got, c.want, wantDate)
		}
	}
}
