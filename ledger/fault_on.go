//go:build callscribe_faults

package ledger

import "github.com/callscribe/callscribe/internal/fault"

// faultPoint kills the process at the named crash point when the test
// harness asked for it (builds with -tags callscribe_faults only).
func faultPoint(name string) { fault.Point(name) }
