package crmsim

import (
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/simserver"
)

const (
	// TokenDefault is the one Bearer token accepted when Config.Tokens is
	// empty.
	TokenDefault = "crm-token"
	// CooldownDefault is Config.Cooldown when left zero.
	CooldownDefault = 2 * time.Second
	// MaxBodyBytes is the largest request body read; a longer one is
	// answered 400.
	MaxBodyBytes = 1 << 20
)

// RetryAfterForm is how a 429 (and a 503) states its Retry-After.
type RetryAfterForm string

// The forms of Config.RetryAfterForm.
const (
	FormSeconds    RetryAfterForm = "seconds"     // delay-seconds, rounded up: "2"
	FormIMFFixdate RetryAfterForm = "imf-fixdate" // "Sun, 06 Nov 1994 08:49:37 GMT", rounded up to the second
	FormNone       RetryAfterForm = "none"        // no Retry-After header at all
	FormMalformed  RetryAfterForm = "malformed"   // a value no RFC 9110 parser accepts, such as "soon"
)

func (f RetryAfterForm) valid() bool {
	switch f {
	case FormSeconds, FormIMFFixdate, FormNone, FormMalformed:
		return true
	}
	return false
}

// Config configures a Server. The zero Config is a well-behaved CRM that
// accepts TokenDefault and never throttles or fails; each trouble knob
// adds one kind of misbehaviour.
type Config struct {
	// Tokens are the accepted Bearer tokens; each is one integration with
	// its own quota (cooldowns are per token). Default (empty):
	// []string{TokenDefault}. An empty string among them is refused.
	Tokens []string

	// Clock supplies now for applied_at and cooldown deadlines, read in
	// UTC; tests inject a stepping clock. Latency is waited with real
	// timers, not with the Clock. Default (nil): clock.System.
	Clock clock.Clock

	// Rand decides every piece of trouble, so a seeded Rand makes a
	// sequential run reproducible; concurrent traffic draws in arrival
	// order. The Server guards it with its own mutex: do not use it
	// elsewhere while the Server runs. Default (nil): a PCG seeded from the
	// current time. A knob at 0 or 1 draws nothing.
	Rand *rand.Rand

	// Logger receives one Info record per piece of trouble (cooldown
	// started, conflict, drop) and a Debug record per answer. It never
	// receives bodies (they carry transcript text) or tokens. Default
	// (nil): discard.
	Logger *slog.Logger

	// RateLimitShare is the probability, in [0, 1], that an authenticated
	// delivery arriving outside a cooldown is answered 429 rate_limited and
	// starts a cooldown of its token. Default 0.
	RateLimitShare float64

	// RetryAfterForm is how 429 and 503 answers state the time left.
	// Default (""): FormSeconds.
	RetryAfterForm RetryAfterForm

	// Cooldown is how long a 429 lasts: until then every delivery with the
	// same token is answered 429 with the time left. A 503's Retry-After
	// also says Cooldown, but starts no cooldown. Default CooldownDefault
	// (2s); zero means the default; negative is refused.
	Cooldown time.Duration

	// ServerErrorShare is the probability, in [0, 1], that an
	// authenticated delivery not refused by the rate limit is answered
	// 500, 502, 503 (with a Retry-After in RetryAfterForm) or 504, before
	// anything is applied. Default 0.
	ServerErrorShare float64

	// Latency is waited before every request is handled. A client that
	// gives up meanwhile ends the wait: nothing is recorded but
	// Stats.Cancelled. Default 0; negative is refused.
	Latency time.Duration

	// DropAfterApplyShare is the probability, in [0, 1], that a newly
	// applied action set is recorded, OnApply is called, and then the
	// connection is closed with a TCP reset instead of an answer: the
	// sender cannot tell whether it was applied, and its retry must get
	// 200. Replays are never dropped. Default 0.
	//
	// Go's http.Transport silently resends a POST that carries an
	// Idempotency-Key when a reused keep-alive connection fails before the
	// answer; the resend is then a replay. A test that wants to see the
	// drop uses a client with keep-alives disabled.
	DropAfterApplyShare float64

	// OnApply is called with the idempotency key of a newly applied action
	// set, after it is recorded (a concurrent or later delivery of the key
	// is a replay) and before the answer is written or the connection
	// dropped. Tests use it to kill the sender at the worst moment. It runs
	// on the request's goroutine. Default (nil): nothing.
	OnApply func(key string)
}

// WithDefaults returns a copy of c with every zero field that has a
// default set to it. Out-of-range values are kept, for New to refuse.
func (c Config) WithDefaults() Config {
	if len(c.Tokens) == 0 {
		c.Tokens = []string{TokenDefault}
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Rand == nil {
		c.Rand = simserver.NewRand()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RetryAfterForm == "" {
		c.RetryAfterForm = FormSeconds
	}
	if c.Cooldown == 0 {
		c.Cooldown = CooldownDefault
	}
	return c
}

// validate reports the first problem with c after defaults, naming the
// field.
func (c Config) validate() error {
	for i, k := range c.Tokens {
		if k == "" {
			return fmt.Errorf("crmsim: Config.Tokens[%d] is empty", i)
		}
	}
	for _, s := range []struct {
		name string
		v    float64
	}{
		{"RateLimitShare", c.RateLimitShare},
		{"ServerErrorShare", c.ServerErrorShare},
		{"DropAfterApplyShare", c.DropAfterApplyShare},
	} {
		if math.IsNaN(s.v) || s.v < 0 || s.v > 1 {
			return fmt.Errorf("crmsim: Config.%s is %v, want a probability in [0, 1]", s.name, s.v)
		}
	}
	if c.Cooldown < 0 {
		return fmt.Errorf("crmsim: Config.Cooldown is %v, want >= 0", c.Cooldown)
	}
	if c.Latency < 0 {
		return fmt.Errorf("crmsim: Config.Latency is %v, want >= 0", c.Latency)
	}
	if !c.RetryAfterForm.valid() {
		return fmt.Errorf("crmsim: Config.RetryAfterForm is %q, want one of seconds, imf-fixdate, none, malformed", c.RetryAfterForm)
	}
	return nil
}
