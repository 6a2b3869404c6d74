//go:build !callscribe_faults

package outbox

// faultPoint marks a named crash point; production builds do nothing there.
func faultPoint(string) {}
