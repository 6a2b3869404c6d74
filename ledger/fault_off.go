//go:build !callscribe_faults

package ledger

// faultPoint marks a named crash point; production builds do nothing there.
func faultPoint(string) {}
