package stackgrow

import (
	"runtime"
	"sync"
	"testing"
)

// TestGrowLeavesEachGoroutineASizeStack parks n goroutines that called
// Grow and checks that the process's stacks grew by about n × Size: the
// stack stays grown after Grow returns, which is its whole point. Without
// Grow each would hold its starting stack (a few KiB).
func TestGrowLeavesEachGoroutineASizeStack(t *testing.T) {
	for _, grow := range []bool{false, true} {
		const n = 128
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var ready, done sync.WaitGroup
		release := make(chan struct{})
		ready.Add(n)
		done.Add(n)
		for range n {
			go func() {
				defer done.Done()
				if grow {
					Grow()
				}
				ready.Done()
				<-release
			}()
		}
		ready.Wait()
		runtime.ReadMemStats(&after)
		close(release)
		done.Wait()
		added := int64(after.StackInuse) - int64(before.StackInuse)
		t.Logf("grow %v: %d goroutines added %d bytes of stack", grow, n, added)
		if grow && added < n*Size*3/4 {
			t.Errorf("with Grow, %d goroutines added %d bytes of stack, want at least %d (%d each)", n, added, n*Size*3/4, Size)
		}
		if !grow && added >= n*Size/4 {
			t.Errorf("without Grow, %d goroutines added %d bytes of stack: the test cannot tell Grow's effect", n, added)
		}
	}
}

// BenchmarkDeepGoroutine is a short-lived goroutine that goes about
// 24 KiB deep, as a job's does, with and without Grow first.
func BenchmarkDeepGoroutine(b *testing.B) {
	for _, grow := range []bool{false, true} {
		name := "plain"
		if grow {
			name = "grow"
		}
		b.Run(name, func(b *testing.B) {
			done := make(chan struct{})
			for b.Loop() {
				go func() {
					if grow {
						Grow()
					}
					deep(96)
					done <- struct{}{}
				}()
				<-done
			}
		})
	}
}

// deep recurses n frames of about 256 bytes each.
//
//go:noinline
func deep(n int) byte {
	var pad [200]byte
	pad[n%200] = byte(n)
	if n == 0 {
		return pad[0]
	}
	return deep(n-1) + pad[(n+1)%200]
}
