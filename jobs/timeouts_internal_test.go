package jobs

import (
	"testing"
	"time"
)

// TestJobTimeouts: each of the pipeline's own jobs is bounded by its
// kind's Timeout, not by the StepTimeout of a transcription, and a test's
// cap shortens every one of them.
func TestJobTimeouts(t *testing.T) {
	p := &Pipeline{cfg: Config{StepTimeout: StepTimeoutDefault}}
	got := func() []time.Duration {
		return []time.Duration{(&sweepWorker{p: p}).Timeout(nil), (&retentionWorker{p: p}).Timeout(nil),
			(&formWorker{p: p}).Timeout(nil), (&manifestWorker{p: p}).Timeout(nil)}
	}
	for i, want := range []time.Duration{SweepTimeout, RetentionTimeout, FormManifestsTimeout, ManifestTimeout} {
		if g := got()[i]; g != want || g <= 0 {
			t.Errorf("job %d: Timeout %s, want %s", i, g, want)
		}
	}
	p.CapJobTimeouts(500 * time.Millisecond)
	for i, g := range got() {
		if g != 500*time.Millisecond {
			t.Errorf("job %d, capped: Timeout %s, want 500ms", i, g)
		}
	}
	if (&transcribeWorker{p: p}).Timeout(nil) != 0 {
		t.Error("a transcribe step has a Timeout of its own: it must keep River's JobTimeout (StepTimeout)")
	}
}
