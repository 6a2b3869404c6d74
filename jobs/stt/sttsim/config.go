package sttsim

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/simserver"
)

const (
	// APIKeyDefault is the one Bearer key accepted when Config.APIKeys is
	// empty.
	APIKeyDefault = "sim-key"
	// ModelDefault is the model of a submission that names none; it is part
	// of the throttling scope.
	ModelDefault = "general"
	// CooldownDefault is Config.Cooldown when left zero.
	CooldownDefault = 2 * time.Second
	// InFlightRetryAfterDefault is Config.InFlightRetryAfter when left zero.
	InFlightRetryAfterDefault = time.Second
	// MaxAudioBytesDefault is Config.MaxAudioBytes when left zero: 25 MiB.
	MaxAudioBytesDefault int64 = 25 << 20
	// ConfidenceDefault is the confidence of the default transcriber.
	ConfidenceDefault = 0.93
)

// RetryAfterForm is how a 429 or 503 answer states its Retry-After.
type RetryAfterForm string

// The forms of Config.RetryAfterForm. FormMixed is a rotation: each 429 or
// 503 answer takes the next of the other six, in the order listed.
const (
	FormSeconds    RetryAfterForm = "seconds"     // delay-seconds, rounded up: "2"
	FormIMFFixdate RetryAfterForm = "imf-fixdate" // "Sun, 06 Nov 1994 08:49:37 GMT"
	FormRFC850     RetryAfterForm = "rfc850"      // "Sunday, 06-Nov-94 08:49:37 GMT"
	FormASCTime    RetryAfterForm = "asctime"     // "Sun Nov  6 08:49:37 1994"
	FormNone       RetryAfterForm = "none"        // no Retry-After header at all
	FormMalformed  RetryAfterForm = "malformed"   // a value no RFC 9110 parser accepts, such as "soon"
	FormMixed      RetryAfterForm = "mixed"       // rotate through the six forms above
)

// mixedRotation is the order in which FormMixed hands out forms.
var mixedRotation = []RetryAfterForm{FormSeconds, FormIMFFixdate, FormRFC850, FormASCTime, FormNone, FormMalformed}

// usable reports whether a client can read a deadline from a header in
// form f, which is what makes a cooldown "announced".
func (f RetryAfterForm) usable() bool {
	switch f {
	case FormSeconds, FormIMFFixdate, FormRFC850, FormASCTime:
		return true
	}
	return false
}

func (f RetryAfterForm) valid() bool {
	return f == FormMixed || f == FormNone || f == FormMalformed || f.usable()
}

// Config configures a Server. The zero Config is a well-behaved server that
// accepts APIKeyDefault, answers every submission synchronously and never
// throttles; each trouble knob adds one kind of misbehaviour.
type Config struct {
	// APIKeys are the accepted Bearer keys. Each (key, model) pair is a
	// throttling scope. Default (empty): []string{APIKeyDefault}. An empty
	// string among them is refused.
	APIKeys []string

	// Models, when not empty, are the models the plan includes: a
	// submission for another model is answered 403 forbidden. Default
	// (empty): every model is allowed.
	Models []string

	// Clock supplies now for arrivals, cooldown deadlines and transcription
	// progress, read in UTC; tests inject a stepping clock. Latency is
	// waited with real timers, not with the Clock. Default (nil):
	// clock.System.
	Clock clock.Clock

	// Rand decides every piece of trouble (and latency jitter), so a seeded
	// Rand makes a sequential run reproducible; concurrent traffic draws in
	// arrival order. The Server guards it with its own mutex: do not use it
	// elsewhere while the Server runs. Default (nil): a PCG seeded from the
	// current time. A knob at 0 or 1 draws nothing.
	Rand *rand.Rand

	// TroubleSeed, when not zero, makes the trouble of a submission a
	// function of its idempotency key rather than of arrival order: the
	// k-th submission of a key that reaches the trouble knobs (outside a
	// cooldown, under MaxInFlight) draws from a generator seeded by
	// TroubleSeed, the key and k, and so does the Retry-After form of the
	// cooldown it starts under FormMixed. Two clients that differ only in
	// how they pace the same recordings then meet the same trouble (the
	// same recordings refused on the same attempts), which is what makes
	// their figures comparable on one seed. Default 0: Rand decides.
	TroubleSeed uint64

	// Logger receives one Info record per piece of trouble (cooldown
	// started, violation, drop) and a Debug record per answer. It never
	// receives transcript text, audio URLs or whole API keys. Default
	// (nil): discard.
	Logger *slog.Logger

	// RateLimitShare is the probability, in [0, 1], that a submission
	// (single or batch; never a poll) arriving outside a cooldown is
	// refused with 429 rate_limited and starts a cooldown of its scope.
	// Default 0.
	RateLimitShare float64

	// Cooldown is the length of a cooldown: until StartedAt+Cooldown every
	// submission of the scope is answered 429 with the remaining time.
	// Default CooldownDefault (2s); zero means the default; negative is
	// refused.
	Cooldown time.Duration

	// RetryAfterForm is how 429 and 503 answers state the remaining
	// cooldown (or InFlightRetryAfter, for a 429 over MaxInFlight). Default
	// (""): FormSeconds. Only the four parseable forms announce a cooldown
	// (see Cooldown.AnnouncedAt).
	RetryAfterForm RetryAfterForm

	// UnavailableShare is the probability, in [0, 1], that a request (any
	// route) is answered 503 unavailable with a Retry-After in
	// RetryAfterForm. On a submission, a 503 that carries a header (any form
	// but FormNone) also starts a cooldown of its scope. Default 0.
	UnavailableShare float64

	// ServerErrorShare is the probability, in [0, 1], that a request (any
	// route) is answered 500, 502 or 504 with a server_error body. Default 0.
	ServerErrorShare float64

	// MaxInFlight is how many submissions of one scope may be in flight at
	// once; a submission that arrives outside a cooldown while its scope
	// already has MaxInFlight in flight is answered 429 rate_limited ("too
	// many concurrent requests") with a Retry-After of InFlightRetryAfter
	// in RetryAfterForm. That refuses only the request: it starts no
	// cooldown. The check comes after the cooldown's and before the
	// random trouble knobs, which draw nothing for a refused request.
	//
	// In flight are, per scope: the submissions (a single or a batch POST,
	// one each) the server is handling, from when their body has been
	// read, before Latency, until their answer; plus the asynchronous work
	// accepted with 202 and not yet ready by Clock: each single
	// transcription until its ready time, each batch (as one) until its
	// last new item's. Polls and reconciles never count and are never
	// refused by it. Stats.MaxInFlightSeen keeps each scope's peak, also
	// when MaxInFlight is 0. Default 0: unlimited; negative is refused.
	MaxInFlight int

	// InFlightRetryAfter is the delay the Retry-After of a 429 over
	// MaxInFlight states. Default InFlightRetryAfterDefault (1s); zero
	// means the default; negative is refused.
	InFlightRetryAfter time.Duration

	// Latency is waited before every request is handled, plus a uniform
	// random part in [0, LatencyJitter); a submission waits after its body
	// is read, and counts as in flight meanwhile (see MaxInFlight). A
	// client that gives up meanwhile ends the wait: nothing is recorded but
	// Stats.Cancelled. Defaults 0; negative is refused.
	Latency       time.Duration
	LatencyJitter time.Duration

	// DecideOnReceipt moves the throttling of submissions (cooldown,
	// in-flight limit, trouble knobs) to when the body has been read,
	// before Latency, as a gateway in front of the transcriber decides:
	// a refusal is answered at once, and only accepted work waits Latency
	// (a client that goes away meanwhile leaves its arrival with Status
	// 0). Arrival.ArrivedAt is then the time of that decision. Default
	// false: submissions wait Latency first and are decided after it.
	DecideOnReceipt bool

	// AsyncShare is the probability, in [0, 1], that an accepted single
	// submission is answered 202 queued instead of 200 completed; it is
	// queued for the first half of ProcessingTime, processing for the
	// second, then completed (or failed). Batch items are always
	// asynchronous. Default 0.
	AsyncShare float64

	// ProcessingTime is how long an asynchronous transcription takes,
	// measured with Clock. A batch staggers its new items over it: item i
	// of n is ready after ProcessingTime*(i+1)/n. Default 0: ready at the
	// first poll. Negative is refused.
	ProcessingTime time.Duration

	// PollRetryAfter is the raw Retry-After sent with every answer that
	// carries an unfinished transcription or batch (202 on submit, 200 on
	// poll or reconcile). Default (""): none.
	PollRetryAfter string

	// DropAfterAcceptShare is the probability, in [0, 1], that a newly
	// accepted submission (single or batch) is recorded, OnAccept is
	// called, and then the connection is closed with a TCP reset instead
	// of an answer. Replays are never dropped. Default 0.
	//
	// Go's http.Transport silently resends a POST that carries an
	// Idempotency-Key when a reused keep-alive connection fails before the
	// answer; the resend is then a replay. A test that wants to see the
	// drop uses a client with keep-alives disabled.
	DropAfterAcceptShare float64

	// BatchItemFailShare and BatchItemLoseShare are the probabilities, in
	// [0, 1] and together at most 1, that a new batch item fails or is
	// lost. A failed item ends failed with a server_error (the
	// transcriber's trouble: worth sending again); a lost one disappears:
	// no answer about its batch lists it, and its transcription id is
	// unknown. Either way the server forgets the
	// item's key, so a later submission with it is transcribed anew.
	// Items known before (replays) keep what they had. Default 0.
	BatchItemFailShare float64
	BatchItemLoseShare float64

	// NoBatches: the server offers no batches, so POST /v1/batches is
	// answered 404 like any unknown route. Default false.
	NoBatches bool

	// MaxAudioBytes is the largest file:// audio accepted; a larger file is
	// answered 413 audio_too_large. http(s) audio is never fetched, so never
	// measured. Default MaxAudioBytesDefault (25 MiB); zero means the
	// default; negative is refused.
	MaxAudioBytes int64

	// Transcribe turns an accepted submission into a Result; an error makes
	// the transcription failed (transcription_failed, with the error's
	// text as message). It is called once per new transcription, outside
	// the Server's lock, possibly concurrently. Default: DefaultTranscriber
	// with ExpectedText.
	Transcribe func(req SubmitRequest) (Result, error)

	// ExpectedText maps audio_sha256 (lower-case hex) to the text the
	// default transcriber returns for it. Ignored when Transcribe is set.
	// The Server reads it concurrently: do not change it after New.
	ExpectedText map[string]string

	// OnAccept is called with the Idempotency-Key of a newly accepted
	// submission (a batch's manifest key for a batch), after it is recorded
	// (so reconcile finds it) and before the answer is written or the
	// connection dropped. Tests use it to kill the client at the worst
	// moment. It runs on the request's goroutine. Default (nil): nothing.
	OnAccept func(key string)
}

// WithDefaults returns a copy of c with every zero field that has a default
// set to it. Out-of-range values are kept, for New to refuse.
func (c Config) WithDefaults() Config {
	if len(c.APIKeys) == 0 {
		c.APIKeys = []string{APIKeyDefault}
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
	if c.Cooldown == 0 {
		c.Cooldown = CooldownDefault
	}
	if c.RetryAfterForm == "" {
		c.RetryAfterForm = FormSeconds
	}
	if c.InFlightRetryAfter == 0 {
		c.InFlightRetryAfter = InFlightRetryAfterDefault
	}
	if c.MaxAudioBytes == 0 {
		c.MaxAudioBytes = MaxAudioBytesDefault
	}
	if c.Transcribe == nil {
		c.Transcribe = DefaultTranscriber(c.ExpectedText)
	}
	return c
}

// validate reports the first problem with c after defaults, naming the
// field.
func (c Config) validate() error {
	for i, k := range c.APIKeys {
		if k == "" {
			return fmt.Errorf("sttsim: Config.APIKeys[%d] is empty", i)
		}
	}
	for i, m := range c.Models {
		if m == "" {
			return fmt.Errorf("sttsim: Config.Models[%d] is empty", i)
		}
	}
	shares := []struct {
		name string
		v    float64
	}{
		{"RateLimitShare", c.RateLimitShare},
		{"UnavailableShare", c.UnavailableShare},
		{"ServerErrorShare", c.ServerErrorShare},
		{"AsyncShare", c.AsyncShare},
		{"DropAfterAcceptShare", c.DropAfterAcceptShare},
		{"BatchItemFailShare", c.BatchItemFailShare},
		{"BatchItemLoseShare", c.BatchItemLoseShare},
	}
	for _, s := range shares {
		if math.IsNaN(s.v) || s.v < 0 || s.v > 1 {
			return fmt.Errorf("sttsim: Config.%s is %v, want a probability in [0, 1]", s.name, s.v)
		}
	}
	if c.BatchItemFailShare+c.BatchItemLoseShare > 1 {
		return fmt.Errorf("sttsim: Config.BatchItemFailShare + BatchItemLoseShare is %v, want at most 1", c.BatchItemFailShare+c.BatchItemLoseShare)
	}
	durations := []struct {
		name string
		v    time.Duration
	}{
		{"Cooldown", c.Cooldown},
		{"InFlightRetryAfter", c.InFlightRetryAfter},
		{"Latency", c.Latency},
		{"LatencyJitter", c.LatencyJitter},
		{"ProcessingTime", c.ProcessingTime},
	}
	for _, d := range durations {
		if d.v < 0 {
			return fmt.Errorf("sttsim: Config.%s is %v, want >= 0", d.name, d.v)
		}
	}
	if !c.RetryAfterForm.valid() {
		return fmt.Errorf("sttsim: Config.RetryAfterForm is %q, want one of seconds, imf-fixdate, rfc850, asctime, none, malformed, mixed", c.RetryAfterForm)
	}
	if c.MaxInFlight < 0 {
		return fmt.Errorf("sttsim: Config.MaxInFlight is %d, want >= 0 (0: unlimited)", c.MaxInFlight)
	}
	if c.MaxAudioBytes < 0 {
		return errors.New("sttsim: Config.MaxAudioBytes is negative")
	}
	return nil
}
