package render

import (
	"fmt"
	"io"
	"time"

	"github.com/callscribe/callscribe/ledger"
)

// Accounting prints the submissions-against-cooldowns accounting of
// `scopes audit` for people.
func Accounting(w io.Writer, acc ledger.CooldownAccounting) {
	fmt.Fprintf(w, "submissions:                 %d (%d answered 429)\n", acc.Submissions, acc.Throttled)
	fmt.Fprintf(w, "ignored a known cooldown:    %d (must be 0 where enforced; %d of them answered 429)\n", acc.IgnoredKnownCooldown, acc.ThrottledIgnored)
	fmt.Fprintf(w, "in flight at an announcement: %d (allowed; longest admission-to-send gap among them %s)\n", acc.InFlight, acc.InFlightGapMax)
	fmt.Fprintf(w, "admission-to-send gap:       p50 %s, p99 %s, max %s (over %d sent)\n", acc.GapP50, acc.GapP99, acc.GapMax, acc.Sent)
	for _, c := range acc.Ignored {
		mode := "enforced"
		if c.Observe {
			mode = "observed"
		}
		fmt.Fprintf(w, "  ignored (%s): %s/%s scope %s admitted at %s with seq %d; offer %d deferred it until %s\n", mode,
			Printable(c.TenantID), Printable(c.CallID), Printable(c.Scope), c.AdmittedAt.Format(time.RFC3339Nano), c.AdmittedSeq,
			c.IgnoredSeq, c.IgnoredNotBefore.Format(time.RFC3339Nano))
	}
}
