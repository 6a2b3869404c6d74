package capacity_test

import (
	"context"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

// TestLeaseOwnerQuota: an owner holds at most ceil(limit × share) leases
// of a provider/kind; another owner still gets the rest; a release or a
// lapse gives the owner's place back; keyed and ownerless requests are not
// counted against anyone.
func TestLeaseOwnerQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 5}}})
	l := b.leases
	req := func(owner string) capacity.Request {
		return capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: owner + "/hog", Owner: owner, OwnerShare: 0.5}
	}
	var hog []capacity.Lease
	for i := range 3 { // ceil(5 × 0.5) = 3
		lease, g := l.Acquire(ctx, req("harbor"))
		if !g.Granted || g.OwnerInUse != i+1 || g.OwnerQuota != 3 || g.OverQuota {
			t.Fatalf("harbor's lease %d: %+v", i+1, g)
		}
		hog = append(hog, lease)
	}
	if _, g := l.Acquire(ctx, req("harbor")); g.Granted || !g.OverQuota || g.OwnerInUse != 3 || g.InUse != 3 {
		t.Fatalf("harbor's 4th lease: want refused over its quota with 2 slots free, got %+v", g)
	}
	for i := range 2 {
		if _, g := l.Acquire(ctx, req("northline")); !g.Granted || g.OwnerInUse != i+1 {
			t.Fatalf("northline's lease %d: %+v", i+1, g)
		}
	}
	if _, g := l.Acquire(ctx, req("northline")); g.Granted || g.OverQuota {
		t.Fatalf("northline's 3rd lease with the plan full: want refused by the limit, not the quota, got %+v", g)
	}
	l.Release(ctx, hog[0])
	if _, g := l.Acquire(ctx, req("harbor")); !g.Granted || g.OwnerInUse != 3 {
		t.Fatalf("harbor after a release: %+v", g)
	}
	// A lapse gives the place back too.
	b.clock.Advance(b.leases.LeaseLength(capacity.KindSTT) + time.Second)
	if _, g := l.Acquire(ctx, req("harbor")); !g.Granted || g.OwnerInUse != 1 {
		t.Fatalf("harbor after its leases lapsed: %+v", g)
	}
	// Requests without an owner are not limited by anyone's quota.
	for range 4 {
		if _, g := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "pipeline"}); !g.Granted || g.OwnerQuota != 0 {
			t.Fatalf("an ownerless lease: %+v", g)
		}
	}
	if n := b.zcard(t, "acme", capacity.KindSTT); n != 5 {
		t.Fatalf("leases in Redis: got %d, want 5", n)
	}
}
