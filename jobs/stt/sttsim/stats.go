package sttsim

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"time"
)

// Scope is a throttling scope: an API key and a model. A cooldown refuses
// the submissions of one scope and no other.
type Scope struct {
	APIKey string
	Model  string
}

// String names the scope for logs without revealing the key: at most its
// first four characters, then "…" and four hex digits of its SHA-256, so
// that two keys stay apart.
func (s Scope) String() string {
	sum := sha256.Sum256([]byte(s.APIKey))
	return s.APIKey[:min(4, len(s.APIKey)/2)] + "…" + hex.EncodeToString(sum[:2]) + "/" + s.Model
}

// Cooldown is one quota window of a scope, from StartedAt to Deadline,
// during which every submission of the scope is answered 429.
type Cooldown struct {
	Scope     Scope
	Status    int // 429 or 503: the answer that started it
	StartedAt time.Time
	Deadline  time.Time
	// Form and Header are the Retry-After of the answer that started the
	// cooldown: its concrete form (never FormMixed) and its raw value, ""
	// for FormNone.
	Form   RetryAfterForm
	Header string
	// AnnouncedAt is when a client was first told the deadline: the first
	// answer of the cooldown whose header was a delay-seconds or an
	// HTTP-date. Zero while only FormNone or FormMalformed answers were
	// sent: a cooldown nobody was told about has no violations.
	AnnouncedAt     time.Time
	AnnouncedForm   RetryAfterForm
	AnnouncedHeader string
	// Answers counts the 429 and 503 answers of this cooldown, the first
	// included.
	Answers int
}

// Announced reports whether a client was told the deadline.
func (c Cooldown) Announced() bool { return !c.AnnouncedAt.IsZero() }

// Arrival is one submission (single or batch) whose scope was known: it
// was authenticated, carried an Idempotency-Key and a JSON body.
type Arrival struct {
	Scope          Scope
	IdempotencyKey string // a batch's manifest key for a batch
	Batch          bool
	// ArrivedAt is when the server took the submission up, by Config.Clock:
	// after Config.Latency.
	ArrivedAt time.Time
	// AdmittedAt is the X-Admitted-At header, zero when it was absent or
	// not RFC 3339; AdmittedAtHeader is its raw value.
	AdmittedAt       time.Time
	AdmittedAtHeader string
	// InFlight is set when the submission arrived during an announced
	// cooldown but was admitted by the client no later than the
	// announcement; Violation when it arrived during an announced cooldown
	// and was admitted after the announcement, or did not say when.
	InFlight  bool
	Violation bool
	// OverLimit is set when the submission was answered 429 because its
	// scope had Config.MaxInFlight in flight when its body was read (before
	// Config.Latency), and no cooldown refused it first. It is unrelated to
	// InFlight above.
	OverLimit bool
	// Status is the HTTP status answered; 0 when the connection was
	// dropped (Dropped) or the client went away first.
	Status  int
	Dropped bool
}

// Violation is a submission that arrived before the deadline of a cooldown
// already announced to it: evidence that a client did not respect the
// Retry-After.
type Violation struct {
	Scope            Scope
	IdempotencyKey   string
	Batch            bool
	ArrivedAt        time.Time
	AdmittedAt       time.Time // zero when X-Admitted-At was absent or malformed
	AdmittedAtHeader string
	AnnouncedAt      time.Time
	Deadline         time.Time
}

// Stats is a snapshot of what a Server saw and did. It is a copy: holding it
// does not block the Server, and the Server does not change it.
type Stats struct {
	// Submissions counts arrivals (see Arrival), singles and batches;
	// SubmissionsByScope splits them by scope; Batches counts the batch
	// ones.
	Submissions        int
	SubmissionsByScope map[Scope]int
	Batches            int

	// RateLimited counts every 429 answer: those that start a cooldown,
	// those during one, and those over Config.MaxInFlight. OverLimit counts
	// the last kind alone (a subset of RateLimited); they start no
	// cooldown, so RateLimited-OverLimit is the 429s of cooldowns.
	RateLimited  int
	OverLimit    int
	Unavailable  int // 503 answers, any route
	ServerErrors int // 500, 502 and 504 answers, any route

	// MaxInFlightSeen is, per scope, the most submissions and
	// asynchronous work in flight at once (see Config.MaxInFlight), counted
	// whether or not MaxInFlight is set: never above MaxInFlight when it
	// is, since the server refuses the rest (OverLimit says how often a
	// client tried). InFlight is the count of each scope that has any at
	// the time of the snapshot.
	MaxInFlightSeen map[Scope]int
	InFlight        map[Scope]int

	// Accepted counts new transcriptions: accepted singles and batch items
	// that were not already known. Replays counts submissions (singles and
	// batches) answered with what an earlier one with the same key
	// created.
	Accepted int
	Replays  int
	// BatchItemsFailed and BatchItemsLost count the new batch items that
	// Config.BatchItemFailShare failed and BatchItemLoseShare lost.
	BatchItemsFailed int
	BatchItemsLost   int

	// Transcriptions counts, per idempotency key, how many times the
	// transcriber ran. A correct client never makes one exceed 1.
	Transcriptions map[string]int

	Cooldowns  []Cooldown
	Violations []Violation
	Arrivals   []Arrival

	Drops      int // accepted submissions answered with a reset connection
	Polls      int // GET /v1/transcriptions/{id} and GET /v1/batches/{id}
	Reconciles int // GET /v1/transcriptions?idempotency_key=
	Cancelled  int // requests whose client went away before the answer
}

// clone is a deep copy of s.
func (s *Stats) clone() Stats {
	c := *s
	c.SubmissionsByScope = maps.Clone(s.SubmissionsByScope)
	c.Transcriptions = maps.Clone(s.Transcriptions)
	c.Cooldowns = slices.Clone(s.Cooldowns)
	c.Violations = slices.Clone(s.Violations)
	c.Arrivals = slices.Clone(s.Arrivals)
	c.MaxInFlightSeen = maps.Clone(s.MaxInFlightSeen)
	c.InFlight = maps.Clone(s.InFlight)
	return c
}

// Stats returns a snapshot of what the server saw. It is safe to call
// during traffic.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.st.clone()
	c.InFlight = s.inFlightAllLocked(s.now())
	return c
}

// OverLimitAfterCooldowns counts the 429s over Config.MaxInFlight that
// arrived soon after a cooldown ended, the mark of clients that all resume
// at the deadline at once. For each cooldown in s.Cooldowns (started by a
// 429 or a 503) it counts the arrivals of the cooldown's scope with
// OverLimit set whose ArrivedAt (taken after Config.Latency) is in
// [Deadline, Deadline+window); total is the sum of those counts (an
// arrival within the windows of two cooldowns of its scope counts for
// each), perCooldown is total divided by the number of cooldowns, 0 when
// there were none. Over-limit 429s at other times, and 429s of cooldowns,
// are not counted.
func (s Stats) OverLimitAfterCooldowns(window time.Duration) (perCooldown float64, total int) {
	if len(s.Cooldowns) == 0 {
		return 0, 0
	}
	for _, cd := range s.Cooldowns {
		end := cd.Deadline.Add(window)
		for _, a := range s.Arrivals {
			if a.OverLimit && a.Scope == cd.Scope && !a.ArrivedAt.Before(cd.Deadline) && a.ArrivedAt.Before(end) {
				total++
			}
		}
	}
	return float64(total) / float64(len(s.Cooldowns)), total
}

// ReopenLag is how long, on average, a scope stayed idle after its
// cooldowns ended: for each cooldown followed by an arrival of its scope,
// the time from its Deadline to the first such arrival (ArrivedAt, taken
// after Config.Latency). A client that honours Retry-After rounded up to
// whole seconds pays part of a second here; a slow wake-up pays the rest.
// n is the number of cooldowns counted.
func (s Stats) ReopenLag() (mean time.Duration, n int) {
	var sum time.Duration
	for _, cd := range s.Cooldowns {
		var first time.Time
		for _, a := range s.Arrivals {
			if a.Scope == cd.Scope && !a.ArrivedAt.Before(cd.Deadline) && (first.IsZero() || a.ArrivedAt.Before(first)) {
				first = a.ArrivedAt
			}
		}
		if !first.IsZero() {
			sum += first.Sub(cd.Deadline)
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return sum / time.Duration(n), n
}

// Transcriptions reports how many times the transcriber ran for the
// idempotency key: 0 if never, 1 for a key a correct client submitted.
func (s *Server) Transcriptions(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Transcriptions[key]
}
