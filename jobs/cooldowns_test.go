package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/callscribe/callscribe/ledger"
)

// checkCooldowns judges every submission of the test's database by the
// exact rule (ledger.SubmissionAccounting): no enforced submission may have
// ignored a cooldown its admission knew of. It fails the test when the rule
// judged nothing (no submission recorded its admission), and returns the
// accounting for the caller's own checks and logs.
func checkCooldowns(t testing.TB, l *ledger.Ledger) ledger.CooldownAccounting {
	t.Helper()
	acc, err := l.SubmissionAccounting(context.Background(), nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if acc.Submissions == 0 {
		t.Fatal("no submission recorded its admission: the exact rule judged nothing")
	}
	for _, c := range acc.Ignored {
		if !c.Observe {
			t.Errorf("%s/%s ignored a known cooldown: admitted at %s having read seq %d, when offer %d deferred scope %s until %s",
				c.TenantID, c.CallID, c.AdmittedAt.Format(time.RFC3339Nano), c.AdmittedSeq, c.IgnoredSeq, c.Scope,
				c.IgnoredNotBefore.Format(time.RFC3339Nano))
			if evs, err := l.Events(context.Background(), c.RecordingID); err == nil {
				for _, ev := range evs {
					t.Logf("  event %d %s -> %s at %s: %s %v", ev.Seq, ev.Prior, ev.New, ev.At.Format(time.RFC3339Nano), ev.Reason, ev.Detail)
				}
			}
			if exts, err := l.ScopeDeferralExtensions(context.Background(), c.Scope); err == nil {
				for _, x := range exts {
					if x.Seq >= c.IgnoredSeq-2 && x.Seq <= c.IgnoredSeq+2 {
						t.Logf("  offer %d: recorded %s, at %s, offered %s, resulting %s, job %d, observe %v", x.Seq,
							x.RecordedAt.Format(time.RFC3339Nano), x.At.Format(time.RFC3339Nano), x.OfferedNotBefore.Format(time.RFC3339Nano),
							x.ResultingNotBefore.Format(time.RFC3339Nano), x.JobID, x.ObserveOnly)
					}
				}
			}
		}
	}
	t.Logf("exact rule: %d submissions, %d ignored a known cooldown, %d in flight at an announcement (longest gap %s); admission-to-send gap p50 %s p99 %s max %s",
		acc.Submissions, acc.IgnoredKnownCooldown, acc.InFlight, acc.InFlightGapMax, acc.GapP50, acc.GapP99, acc.GapMax)
	return acc
}
