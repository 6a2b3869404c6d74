// Package fault holds the crash-point hook of the fault-injection tests,
// compiled only with -tags callscribe_faults.
package fault
