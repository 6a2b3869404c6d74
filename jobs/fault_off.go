//go:build !callscribe_faults

package jobs

// faultPoint marks a named crash point; production builds do nothing there.
func faultPoint(string) {}
