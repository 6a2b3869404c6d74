package ledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

const helperEnv = "CALLSCRIBE_TEST_EXTEND_URL"

func TestScopeDeferralNeverMovesBackward(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

	d, err := b.ledger.ScopeDeferral(ctx, "openai:whisper")
	if err != nil || !d.NotBefore.IsZero() || d.Active(base) {
		t.Fatalf("never-deferred scope = %+v, %v", d, err)
	}
	header := "Sun, 29 Nov 2026 10:02:00 GMT"
	rec := uuid.New()
	res, err := b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{
		Scope: "openai:whisper", NotBefore: base.Add(2 * time.Minute), RetryAfter: &header,
		Source: "retry-after", JobID: 42, RecordingID: rec, Reason: "429 from vendor",
	})
	if err != nil || !res.Moved || !res.NotBefore.Equal(base.Add(2*time.Minute)) {
		t.Fatalf("first extension = %+v, %v", res, err)
	}
	res, err = b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: "openai:whisper", NotBefore: base.Add(time.Minute), Source: "backoff", Clamped: true})
	if err != nil || res.Moved || !res.NotBefore.Equal(base.Add(2*time.Minute)) {
		t.Fatalf("earlier offer moved the deadline: %+v, %v", res, err)
	}
	if !res.Active(base) || res.Active(base.Add(2*time.Minute)) {
		t.Fatalf("Active around the deadline is wrong: %+v", res)
	}
	exts, err := b.ledger.ScopeDeferralExtensions(ctx, "openai:whisper")
	if err != nil || len(exts) != 2 {
		t.Fatalf("extensions = %d, %v; want 2", len(exts), err)
	}
	first, second := exts[0], exts[1]
	if *first.RetryAfter != header || first.JobID != 42 || first.RecordingID != rec || first.Source != "retry-after" {
		t.Fatalf("first extension record = %+v", first)
	}
	if second.RetryAfter != nil || !second.Clamped || !second.ResultingNotBefore.Equal(base.Add(2*time.Minute)) ||
		!second.OfferedNotBefore.Equal(base.Add(time.Minute)) {
		t.Fatalf("second extension record = %+v", second)
	}
	if _, err := b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{NotBefore: base}); err == nil {
		t.Fatal("extension without a scope accepted")
	}
}

// Many goroutines and a second process extend one scope with random
// deadlines while readers watch: every value read is non-decreasing and the
// final value is the maximum offered.
func TestScopeDeferralConcurrentExtend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const scope = "deepgram:nova"
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+testdb.URLOf(t, b.pool), "CALLSCRIBE_TEST_SCOPE="+scope,
		"CALLSCRIBE_TEST_BASE="+strconv.FormatInt(base.UnixMicro(), 10))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	const writers, offers = 8, 40
	maxOffered := make([]time.Time, writers)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readErrs := make(chan error, 4)
	for range 4 {
		readers.Go(func() {
			var last time.Time
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := b.ledger.ScopeDeferral(ctx, scope)
				if err != nil {
					readErrs <- err
					return
				}
				if d.NotBefore.Before(last) {
					readErrs <- fmt.Errorf("deadline moved backward: %s after %s", d.NotBefore, last)
					return
				}
				last = d.NotBefore
			}
		})
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var lastSeen time.Time
			for range offers {
				offer := base.Add(time.Duration(rng.Int64N(int64(time.Hour)))).Truncate(time.Microsecond)
				if offer.After(maxOffered[w]) {
					maxOffered[w] = offer
				}
				res, err := b.ledger.ScopeDeferralExtend(ctx, ledger.Extension{Scope: scope, NotBefore: offer, Source: "test", JobID: int64(w)})
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				if res.NotBefore.Before(offer) || res.NotBefore.Before(lastSeen) {
					t.Errorf("writer %d: result %s is before its offer %s or an earlier result %s", w, res.NotBefore, offer, lastSeen)
				}
				lastSeen = res.NotBefore
			}
		})
	}
	wg.Wait()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("second process: %v\n%s", err, out.String())
	}
	close(stop)
	readers.Wait()
	close(readErrs)
	for err := range readErrs {
		t.Error(err)
	}

	procMax, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	if err != nil {
		t.Fatalf("second process output %q: %v", out.String(), err)
	}
	want := time.UnixMicro(procMax).UTC()
	for _, m := range maxOffered {
		if m.After(want) {
			want = m
		}
	}
	d, err := b.ledger.ScopeDeferral(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if !d.NotBefore.Equal(want) {
		t.Fatalf("final deadline %s, want the maximum offered %s", d.NotBefore, want)
	}
	exts, err := b.ledger.ScopeDeferralExtensions(ctx, scope)
	if err != nil || len(exts) != writers*offers+offers {
		t.Fatalf("%d extensions recorded (%v), want %d", len(exts), err, writers*offers+offers)
	}
}

// runHelperProcess is the second process of TestScopeDeferralConcurrentExtend:
// it offers random deadlines and prints the largest it offered.
func runHelperProcess() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(helperEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	l, err := ledger.New(pool, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	baseMicros, _ := strconv.ParseInt(os.Getenv("CALLSCRIBE_TEST_BASE"), 10, 64)
	base := time.UnixMicro(baseMicros).UTC()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 11))
	var maxOffered time.Time
	for range 40 {
		offer := base.Add(time.Duration(rng.Int64N(int64(time.Hour)))).Truncate(time.Microsecond)
		if offer.After(maxOffered) {
			maxOffered = offer
		}
		if _, err := l.ScopeDeferralExtend(ctx, ledger.Extension{Scope: os.Getenv("CALLSCRIBE_TEST_SCOPE"), NotBefore: offer, Source: "second process"}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println(maxOffered.UnixMicro())
	return 0
}

// A timing decision goes into the scope's record as it was made: the raw
// header, the clamp, the fallback.
func TestDecisionExtensionRecordsTheDecision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	policy := retryafter.Policy{Clock: clock.NewStub(now), MaxDelay: time.Hour, Rand: rand.New(rand.NewPCG(1, 2))}

	clamped := policy.Decide(" 86400 ", true, 0)
	res, err := b.ledger.ScopeDeferralExtend(ctx, ledger.DecisionExtension("s1", clamped))
	if err != nil {
		t.Fatal(err)
	}
	if !res.NotBefore.Equal(now.Add(time.Hour)) {
		t.Fatalf("clamped deadline %s, want %s", res.NotBefore, now.Add(time.Hour))
	}
	missing := policy.Decide("", false, 3)
	if _, err := b.ledger.ScopeDeferralExtend(ctx, ledger.DecisionExtension("s1", missing)); err != nil {
		t.Fatal(err)
	}
	exts, err := b.ledger.ScopeDeferralExtensions(ctx, "s1")
	if err != nil || len(exts) != 2 {
		t.Fatalf("extensions: %d, %v", len(exts), err)
	}
	if exts[0].RetryAfter == nil || *exts[0].RetryAfter != clamped.Raw || !exts[0].Clamped ||
		exts[0].Source != string(retryafter.SourceRetryAfter) || !strings.Contains(exts[0].Reason, "clamped") {
		t.Fatalf("clamped extension = %+v", exts[0])
	}
	if exts[1].RetryAfter != nil || exts[1].Clamped || exts[1].Source != string(retryafter.SourceBackoff) ||
		!strings.Contains(exts[1].Reason, string(retryafter.FallbackMissing)) {
		t.Fatalf("fallback extension = %+v", exts[1])
	}
}
