package retryafter

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Rand is the source of jitter. *math/rand/v2.Rand satisfies it. Int64N
// must return a value in [0, n) for n > 0, as math/rand/v2 does.
type Rand interface {
	Int64N(n int64) int64
}

var _ Rand = (*rand.Rand)(nil)

// globalRand draws from the goroutine-safe top-level functions of
// math/rand/v2.
type globalRand struct{}

func (globalRand) Int64N(n int64) int64 { return rand.Int64N(n) }

// BackoffCeiling returns min(maximum, base * 2^attempt), the exclusive upper
// bound of Backoff, without overflowing for any attempt. A negative attempt
// counts as 0. It returns 0 when base or maximum is not positive.
func BackoffCeiling(base, maximum time.Duration, attempt int) time.Duration {
	if base <= 0 || maximum <= 0 {
		return 0
	}
	if attempt < 0 {
		attempt = 0
	}
	// base * 2^attempt <= maximum exactly when base <= maximum / 2^attempt.
	if attempt >= 63 || base > maximum>>attempt {
		return maximum
	}
	return base << attempt
}

// Backoff returns a capped exponential backoff with full jitter: a uniformly
// random duration in [0, BackoffCeiling(base, maximum, attempt)). attempt counts
// from 0 for the first retry. When the ceiling is 0 the result is 0. r is
// the source of randomness; nil means the goroutine-safe default of
// math/rand/v2.
//
// Backoff panics if r returns a value outside [0, n): that is a broken Rand,
// a programming error.
func Backoff(base, maximum time.Duration, attempt int, r Rand) time.Duration {
	ceiling := BackoffCeiling(base, maximum, attempt)
	if ceiling <= 0 {
		return 0
	}
	if r == nil {
		r = globalRand{}
	}
	n := int64(ceiling)
	v := r.Int64N(n)
	if v < 0 || v >= n {
		panic(fmt.Sprintf("retryafter: Rand.Int64N(%d) returned %d, outside [0, %d)", n, v, n))
	}
	return time.Duration(v)
}
