package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

func newTestCallerIDs(t testing.TB, r *capacity.Redis, cfg capacity.CallerIDsConfig) *capacity.CallerIDs {
	t.Helper()
	c, err := capacity.NewCallerIDs(r, cfg)
	if err != nil {
		t.Fatalf("NewCallerIDs: %v", err)
	}
	return c
}

func TestCheckNumber(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string // "" = valid; else a part of the error
	}{
		{"+14155550123", ""},
		{"+12345678", ""},
		{"+123456789012345", ""},
		{"", "is required"},
		{"14155550123", "must start with '+'"},
		{"+1415555012a", `has 'a' at byte 11`},
		{"+1 415 555 0123", `has ' ' at byte 2`},
		{"+1234567", "has 7 digits: want 8–15"},
		{"+1234567890123456", "has 16 digits"},
		{"+04155550123", "starts with +0"},
		{"+", "has 0 digits"},
	} {
		err := capacity.CheckNumber("number", tc.in)
		if tc.want == "" {
			if err != nil {
				t.Errorf("CheckNumber(%q) = %v, want nil", tc.in, err)
			}
			continue
		}
		if !errors.Is(err, capacity.ErrInvalidNumber) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "number") {
			t.Errorf("CheckNumber(%q) = %v, want ErrInvalidNumber naming the field and saying %q", tc.in, err, tc.want)
		}
		if tc.in != "" && !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) {
			t.Errorf("CheckNumber(%q) = %v: the error does not show the value", tc.in, err)
		}
	}
	long := "+" + strings.Repeat("9", 200)
	if err := capacity.CheckNumber("number", long); err == nil || len(err.Error()) > 150 {
		t.Errorf("CheckNumber(200 digits) = %v: want a short error", err)
	}
}

func TestCallerIDsAcquireRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	c := newTestCallerIDs(t, captest.OnRedis(t, rdb, prefix), capacity.CallerIDsConfig{})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	capacity.SetCallerIDsNowForTest(c, t0)

	// An empty pool says so.
	_, err := c.Acquire(ctx, "acme", "call-0")
	var none *capacity.NoCallerIDError
	if !errors.As(err, &none) || none.Total != 0 || !strings.Contains(err.Error(), "pool is empty") {
		t.Fatalf("Acquire from an empty pool = %v, want NoCallerIDError with an empty pool", err)
	}
	if n, err := c.Add(ctx, "acme", "+14155550102", "+14155550101"); err != nil || n != 2 {
		t.Fatalf("Add = %d, %v; want 2", n, err)
	}
	if n, err := c.Add(ctx, "acme", "+14155550101", "+14155550103"); err != nil || n != 1 {
		t.Fatalf("Add again = %d, %v; want 1 (idempotent)", n, err)
	}
	// Never used: the lowest number first, then the next.
	a, err := c.Acquire(ctx, "acme", "call-1")
	if err != nil || a.Number != "+14155550101" || a.Token == "" || a.CallID != "call-1" || !a.Since.Equal(t0) {
		t.Fatalf("Acquire = %+v, %v; want +14155550101 since %s", a, err, t0)
	}
	b, err := c.Acquire(ctx, "acme", "call-2")
	if err != nil || b.Number != "+14155550102" {
		t.Fatalf("second Acquire = %+v, %v; want +14155550102", b, err)
	}
	// Another organisation's pool is its own.
	if _, err := c.Acquire(ctx, "other", "call-1"); !errors.Is(err, capacity.ErrNoCallerID) {
		t.Fatalf("Acquire for another org = %v, want ErrNoCallerID", err)
	}
	capacity.SetCallerIDsNowForTest(c, t0.Add(time.Minute))
	// A wrong token frees nothing; the right one frees, once.
	if ok, err := c.Release(ctx, "acme", a.Number, b.Token); ok || err != nil {
		t.Fatalf("Release with another holder's token = %v, %v; want false", ok, err)
	}
	if ok, err := c.Release(ctx, "acme", a.Number, a.Token); !ok || err != nil {
		t.Fatalf("Release = %v, %v; want true", ok, err)
	}
	if ok, err := c.Release(ctx, "acme", a.Number, a.Token); ok || err != nil {
		t.Fatalf("second Release = %v, %v; want false (idempotent)", ok, err)
	}
	// Least recently used: ...103 was never used, so it comes before ...101.
	d, err := c.Acquire(ctx, "acme", "call-3")
	if err != nil || d.Number != "+14155550103" {
		t.Fatalf("Acquire = %+v, %v; want the never-used +14155550103", d, err)
	}
	e, err := c.Acquire(ctx, "acme", "call-4")
	if err != nil || e.Number != "+14155550101" {
		t.Fatalf("Acquire = %+v, %v; want the released +14155550101", e, err)
	}
	_, err = c.Acquire(ctx, "acme", "call-5")
	if !errors.As(err, &none) || none.Busy != 3 || none.Total != 3 || none.Org != "acme" {
		t.Fatalf("Acquire with all busy = %v, want NoCallerIDError 3/3 busy", err)
	}
	if !strings.Contains(err.Error(), "3/3 busy") {
		t.Fatalf("error %q does not say how many are busy", err)
	}

	list, err := c.List(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	want := []capacity.CallerIDState{
		{Number: "+14155550101", State: "busy", BusySince: t0.Add(time.Minute), CallID: "call-4"},
		{Number: "+14155550102", State: "busy", BusySince: t0, CallID: "call-2"},
		{Number: "+14155550103", State: "busy", BusySince: t0.Add(time.Minute), CallID: "call-3"},
	}
	if fmt.Sprint(list) != fmt.Sprint(want) {
		t.Fatalf("List =\n%v\nwant\n%v", list, want)
	}

	// Invalid input names the field.
	for _, tc := range []struct {
		err  error
		want string
	}{
		{func() error { _, err := c.Acquire(ctx, "ac me", "c"); return err }(), "org"},
		{func() error { _, err := c.Acquire(ctx, "acme", ""); return err }(), "call_id"},
		{func() error { _, err := c.Release(ctx, "acme", "555", "t"); return err }(), `number "555"`},
		{func() error { _, err := c.Release(ctx, "acme", "+14155550101", ""); return err }(), "token"},
		{func() error { _, err := c.Add(ctx, "acme", "+14155550104", "0800"); return err }(), `numbers[1] "0800"`},
		{func() error { _, err := c.Add(ctx, "acme"); return err }(), "numbers"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v does not name %q", tc.err, tc.want)
		}
	}
	if l, _ := c.List(ctx, "acme"); len(l) != 3 {
		t.Fatalf("a refused Add changed the pool: %v", l)
	}
}

func TestCallerIDsReclaimStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	c := newTestCallerIDs(t, captest.OnRedis(t, rdb, prefix), capacity.CallerIDsConfig{})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	capacity.SetCallerIDsNowForTest(c, t0)
	if _, err := c.Add(ctx, "acme", "+4930123456"); err != nil {
		t.Fatal(err)
	}
	dead, err := c.Acquire(ctx, "acme", "call-dead")
	if err != nil {
		t.Fatal(err)
	}
	// Just short of the slot timeout, the number stays busy.
	capacity.SetCallerIDsNowForTest(c, t0.Add(capacity.StaleAfterDefault-time.Millisecond))
	if _, err := c.Acquire(ctx, "acme", "call-2"); !errors.Is(err, capacity.ErrNoCallerID) {
		t.Fatalf("Acquire before the timeout = %v, want ErrNoCallerID", err)
	}
	// At the timeout List says stale and the next acquire takes it back.
	capacity.SetCallerIDsNowForTest(c, t0.Add(capacity.StaleAfterDefault))
	if l, err := c.List(ctx, "acme"); err != nil || len(l) != 1 || l[0].State != capacity.CallerIDStale || l[0].CallID != "call-dead" {
		t.Fatalf("List at the timeout = %v, %v; want it stale, held by call-dead", l, err)
	}
	fresh, err := c.Acquire(ctx, "acme", "call-2")
	if err != nil || fresh.Number != dead.Number || fresh.Token == dead.Token {
		t.Fatalf("Acquire after the timeout = %+v, %v; want %s with a new token", fresh, err, dead.Number)
	}
	// The dead holder's late release does not free the new holder's number.
	if ok, err := c.Release(ctx, "acme", dead.Number, dead.Token); ok || err != nil {
		t.Fatalf("stale holder's Release = %v, %v; want false", ok, err)
	}
	if l, _ := c.List(ctx, "acme"); len(l) != 1 || l[0].State != capacity.CallerIDBusy || l[0].CallID != "call-2" {
		t.Fatalf("after the stale release List = %v, want busy for call-2", l)
	}
}

func TestCallerIDsRemove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	c := newTestCallerIDs(t, captest.OnRedis(t, rdb, prefix), capacity.CallerIDsConfig{})
	if _, err := c.Add(ctx, "acme", "+4930111111", "+4930222222", "+4930333333"); err != nil {
		t.Fatal(err)
	}
	held, err := c.Acquire(ctx, "acme", "call-1")
	if err != nil {
		t.Fatal(err)
	}
	// Busy: refused as a whole, naming the busy number.
	_, err = c.Remove(ctx, "acme", false, "+4930333333", held.Number)
	var busy *capacity.CallerIDBusyError
	if !errors.As(err, &busy) || len(busy.Numbers) != 1 || busy.Numbers[0] != held.Number {
		t.Fatalf("Remove of a busy number = %v, want CallerIDBusyError naming %s", err, held.Number)
	}
	if l, _ := c.List(ctx, "acme"); len(l) != 3 {
		t.Fatalf("a refused Remove removed numbers: %v", l)
	}
	if n, err := c.Remove(ctx, "acme", false, "+4930333333", "+4930999999"); err != nil || n != 1 {
		t.Fatalf("Remove of a free and an unknown number = %d, %v; want 1", n, err)
	}
	if n, err := c.Remove(ctx, "acme", true, held.Number); err != nil || n != 1 {
		t.Fatalf("forced Remove = %d, %v; want 1", n, err)
	}
	// The holder's release frees nothing, and the number does not come back.
	if ok, err := c.Release(ctx, "acme", held.Number, held.Token); ok || err != nil {
		t.Fatalf("Release of a removed number = %v, %v; want false", ok, err)
	}
	l, err := c.List(ctx, "acme")
	if err != nil || len(l) != 1 || l[0].Number != "+4930222222" || l[0].State != capacity.CallerIDFree {
		t.Fatalf("List = %v, %v; want only +4930222222, free", l, err)
	}
	// Removed then added again: a fresh, free number.
	if n, err := c.Add(ctx, "acme", held.Number); err != nil || n != 1 {
		t.Fatalf("Add after Remove = %d, %v", n, err)
	}
	if l, _ := c.List(ctx, "acme"); len(l) != 2 || l[0].State != capacity.CallerIDFree || l[1].State != capacity.CallerIDFree {
		t.Fatalf("List = %v, want two free numbers", l)
	}
}

// TestCallerIDsUnavailable: with Redis gone, Acquire says so at once (the
// caller dials with its default number) and Release returns nil.
func TestCallerIDsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, rdb := testredis.Throwaway(t)
	logs := &slotsLogs{}
	r := captest.NewRedis(t, capacity.RedisConfig{Client: rdb, AdmitOpTimeout: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	c := newTestCallerIDs(t, r, capacity.CallerIDsConfig{})
	if _, err := c.Add(ctx, "acme", "+4930111111"); err != nil {
		t.Fatal(err)
	}
	held, err := c.Acquire(ctx, "acme", "call-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		start := time.Now()
		_, err := c.Acquire(ctx, "acme", "call-2")
		if !errors.Is(err, capacity.ErrCallerIDsUnavailable) {
			t.Fatalf("Acquire with Redis down = %v, want ErrCallerIDsUnavailable", err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("Acquire with Redis down took %s", d)
		}
	}
	if ok, err := c.Release(ctx, "acme", held.Number, held.Token); ok || err != nil {
		t.Fatalf("Release with Redis down = %v, %v; want false, nil", ok, err)
	}
	if _, err := c.List(ctx, "acme"); err == nil {
		t.Fatal("List with Redis down returned no error")
	}
	if got := c.Unreachable(); got != 4 {
		t.Fatalf("Unreachable = %d, want 4", got)
	}
	if n := logs.warnings(); n != 1 {
		t.Fatalf("%d warnings logged, want 1 (rate-limited)", n)
	}
}

// TestCallerIDsConcurrent: many goroutines take and give back numbers of a
// small pool; no number is ever held by two at once, and every number is
// free at the end.
func TestCallerIDsConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testredis.New(t, "capacity")
	c := newTestCallerIDs(t, captest.NewRedis(t, capacity.RedisConfig{Client: rdb, KeyPrefix: prefix, AdmitOpTimeout: 10 * time.Second}), capacity.CallerIDsConfig{})
	const pool, workers, rounds = 10, 50, 40
	numbers := make([]string, pool)
	for i := range numbers {
		numbers[i] = fmt.Sprintf("+4930%07d", i)
	}
	if _, err := c.Add(ctx, "acme", numbers...); err != nil {
		t.Fatal(err)
	}
	var (
		holders sync.Map // number → call id
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		grants  int
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for g := range workers {
		wg.Go(func() {
			for r := range rounds {
				call := fmt.Sprintf("call-%d-%d", g, r)
				cid, err := c.Acquire(ctx, "acme", call)
				if errors.Is(err, capacity.ErrNoCallerID) {
					continue
				}
				if err != nil {
					fail(err)
					return
				}
				if prev, loaded := holders.LoadOrStore(cid.Number, call); loaded {
					fail(fmt.Errorf("%s given to %s while %s held it", cid.Number, call, prev))
					return
				}
				mu.Lock()
				grants++
				mu.Unlock()
				// Forget the holder before releasing: after the release
				// another goroutine may rightly take the number.
				holders.Delete(cid.Number)
				ok, err := c.Release(ctx, "acme", cid.Number, cid.Token)
				if err != nil {
					fail(fmt.Errorf("release of %s by %s: %w", cid.Number, call, err))
					return
				}
				if !ok {
					fail(fmt.Errorf("release of %s by its holder %s freed nothing", cid.Number, call))
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if grants < pool {
		t.Errorf("only %d grants in %d attempts", grants, workers*rounds)
	}
	l, err := c.List(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l {
		if s.State != capacity.CallerIDFree {
			t.Errorf("after every release %s is %s", s.Number, s.State)
		}
	}
	if len(l) != pool {
		t.Errorf("List has %d numbers, want %d", len(l), pool)
	}
}
