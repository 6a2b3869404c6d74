package retryafter

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestBackoffCeiling(t *testing.T) {
	t.Parallel()

	const maxDur = time.Duration(math.MaxInt64)
	tests := []struct {
		name          string
		base, maximum time.Duration
		attempt       int
		want          time.Duration
	}{
		{"attempt 0 is base", time.Second, 5 * time.Minute, 0, time.Second},
		{"attempt 1 doubles", time.Second, 5 * time.Minute, 1, 2 * time.Second},
		{"attempt 8", time.Second, 5 * time.Minute, 8, 256 * time.Second},
		{"attempt 9 capped", time.Second, 5 * time.Minute, 9, 5 * time.Minute},
		{"exactly max", time.Second, 256 * time.Second, 8, 256 * time.Second},
		{"attempt 62", time.Second, 5 * time.Minute, 62, 5 * time.Minute},
		{"attempt 63", time.Second, 5 * time.Minute, 63, 5 * time.Minute},
		{"attempt 64", time.Second, 5 * time.Minute, 64, 5 * time.Minute},
		{"attempt MaxInt", time.Second, 5 * time.Minute, math.MaxInt, 5 * time.Minute},
		{"negative attempt counts as 0", time.Second, 5 * time.Minute, -3, time.Second},
		{"MinInt attempt", time.Second, 5 * time.Minute, math.MinInt, time.Second},
		{"1ns base, 2^62", 1, maxDur, 62, 1 << 62},
		{"1ns base, 2^63 capped", 1, maxDur, 63, maxDur},
		{"huge base no overflow", maxDur, maxDur, 1, maxDur},
		{"max below base", time.Minute, time.Second, 0, time.Second},
		{"zero base", 0, time.Minute, 3, 0},
		{"zero max", time.Second, 0, 3, 0},
		{"negative base", -time.Second, time.Minute, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := BackoffCeiling(tt.base, tt.maximum, tt.attempt); got != tt.want {
				t.Errorf("BackoffCeiling(%v, %v, %d) = %v, want %v", tt.base, tt.maximum, tt.attempt, got, tt.want)
			}
		})
	}
}

func TestBackoffUsesRand(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		rand    *stubRand
		attempt int
		want    time.Duration
	}{
		{"lowest", lowestRand(), 3, 0},
		{"highest is below the ceiling", highestRand(), 3, 8*time.Second - 1},
		{"middle", middleRand(), 2, 2 * time.Second},
		{"highest at cap", highestRand(), 100, 5*time.Minute - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Backoff(time.Second, 5*time.Minute, tt.attempt, tt.rand)
			if got != tt.want {
				t.Errorf("Backoff = %v, want %v", got, tt.want)
			}
			want := int64(BackoffCeiling(time.Second, 5*time.Minute, tt.attempt))
			if len(tt.rand.calls) != 1 || tt.rand.calls[0] != want {
				t.Errorf("Rand.Int64N calls = %v, want [%d]", tt.rand.calls, want)
			}
		})
	}
}

func TestBackoffZeroCeilingDoesNotCallRand(t *testing.T) {
	t.Parallel()
	r := highestRand()
	if got := Backoff(0, time.Minute, 5, r); got != 0 {
		t.Errorf("Backoff with zero base = %v, want 0", got)
	}
	if len(r.calls) != 0 {
		t.Errorf("Rand called %v for a zero ceiling", r.calls)
	}
}

func TestBackoffNilRand(t *testing.T) {
	t.Parallel()
	for attempt := range 70 {
		ceiling := BackoffCeiling(time.Second, 5*time.Minute, attempt)
		if got := Backoff(time.Second, 5*time.Minute, attempt, nil); got < 0 || got >= ceiling {
			t.Fatalf("Backoff(attempt %d, nil Rand) = %v, want in [0, %v)", attempt, got, ceiling)
		}
	}
}

func TestBackoffPanicsOnBrokenRand(t *testing.T) {
	t.Parallel()
	for _, pick := range []func(int64) int64{
		func(n int64) int64 { return n },
		func(int64) int64 { return -1 },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("Backoff did not panic on a Rand returning a value outside [0, n)")
				}
			}()
			Backoff(time.Second, time.Minute, 0, &stubRand{pick: pick})
		}()
	}
}

// bigCeiling is min(maximum, base * 2^attempt) in arbitrary precision.
func bigCeiling(base, maximum time.Duration, attempt int) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	if attempt > 200 { // base >= 1, so base * 2^200 is beyond any Duration
		return maximum
	}
	p := new(big.Int).Lsh(big.NewInt(int64(base)), uint(attempt))
	if p.Cmp(big.NewInt(int64(maximum))) > 0 {
		return maximum
	}
	return time.Duration(p.Int64())
}

// genAttempt favours small attempts but reaches huge and negative ones.
func genAttempt() *rapid.Generator[int] {
	return rapid.OneOf(rapid.IntRange(0, 70), rapid.Int(), rapid.SampledFrom([]int{62, 63, 64, math.MaxInt, math.MinInt}))
}

func TestBackoffProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		base := time.Duration(rapid.Int64Range(1, math.MaxInt64).Draw(t, "base"))
		maximum := time.Duration(rapid.Int64Range(1, math.MaxInt64).Draw(t, "max"))
		attempt := genAttempt().Draw(t, "attempt")
		seed := rapid.Uint64().Draw(t, "seed")

		ceiling := BackoffCeiling(base, maximum, attempt)
		if want := bigCeiling(base, maximum, attempt); ceiling != want {
			t.Fatalf("BackoffCeiling(%d, %d, %d) = %d, want %d", base, maximum, attempt, ceiling, want)
		}
		if ceiling <= 0 {
			t.Fatalf("ceiling %d not positive for positive base and max", ceiling)
		}

		// The injected Rand is used: exactly one draw, over the ceiling, and
		// its value is the delay.
		var asked []int64
		var drawn int64
		src := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		rec := &stubRand{pick: func(n int64) int64 {
			asked = append(asked, n)
			drawn = src.Int64N(n)
			return drawn
		}}
		got := Backoff(base, maximum, attempt, rec)
		if got < 0 || got >= ceiling {
			t.Fatalf("Backoff(%d, %d, %d) = %d, want in [0, %d)", base, maximum, attempt, got, ceiling)
		}
		if len(asked) != 1 || asked[0] != int64(ceiling) || time.Duration(drawn) != got {
			t.Fatalf("Rand asked %v, drew %d, Backoff returned %d; want one draw over %d returned as is", asked, drawn, got, ceiling)
		}
	})
}
