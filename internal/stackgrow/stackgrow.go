// Package stackgrow grows a goroutine's stack once, while it is still
// shallow, for goroutines that are known to go deep and live briefly.
//
// A goroutine starts with a small stack, and the runtime doubles it each
// time a call would overflow it, copying every frame then on the stack
// and adjusting the pointers into it (runtime.copystack, with a stack-map
// look-up per frame). River runs each job in a goroutine of its own, and
// the outbox each prompt delivery try; a job goes through pgx, go-redis,
// net/http and JSON, and paid three or four such copies at growing depth.
// In make bench's worker (10,000 recordings) stack growth took 0.63–0.92 s
// of the profile, 0.42 s of it under River's job goroutines; with Grow
// called as a job begins (a River WorkBegin hook) and as a prompt try
// starts, 0.32 s, Grow's one copy of a few frames included.
// BenchmarkDeepGoroutine: a goroutine that goes 24 KiB deep, 17–19 µs
// plain and 10 µs with Grow first.
package stackgrow

// frame is the size of grow's local array: with what the goroutine uses
// already, its stack ends at Size.
const frame = 26 << 10

// Size is the stack a goroutine has after Grow (when it had less).
const Size = 32 << 10

// index keeps grow's array live: the compiler cannot know it is 0.
var index = 0

// Grow grows the calling goroutine's stack to Size in one copy, if it
// is smaller. It costs zeroing frame bytes once the stack is grown.
// grow is not inlined, so its call stays though its answer is unused.
func Grow() { grow(index) }

//go:noinline
func grow(i int) byte {
	var b [frame]byte
	b[i] = byte(i + 1)
	return b[frame-1-i]
}
