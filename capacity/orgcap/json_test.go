package orgcap_test

import (
	"testing"

	"github.com/callscribe/callscribe/capacity/orgcap"
	"github.com/callscribe/callscribe/internal/jsonkeys"
)

// TestJSONFieldNames holds the JSON names of a stored cap and of a change:
// what `orgs list --json` prints and the admin routes answer. docs/json.md
// documents each.
func TestJSONFieldNames(t *testing.T) {
	t.Parallel()
	jsonkeys.Check(t, orgcap.Cap{}, "org", "campaign", "limit", "reason", "updated_by", "updated_at")
	jsonkeys.Check(t, orgcap.Change{}, "id", "org", "campaign", "prior_limit", "limit", "reason", "by", "at")
}
