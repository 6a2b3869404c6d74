package cli

import (
	"fmt"
	"time"
)

// The checks the options of several commands share; each names its flag.

// wantLimit refuses a negative --limit (0 asks for the default).
func wantLimit(n int) error {
	if n < 0 {
		return fmt.Errorf("--limit %d: want a count (0: the default)", n)
	}
	return nil
}

// wantSince refuses a --since that does not reach back.
func wantSince(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--since %s: want a positive duration", d)
	}
	return nil
}
