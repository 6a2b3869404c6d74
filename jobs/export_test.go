package jobs

import "time"

// CapJobTimeouts caps the per-kind Timeout of p's sweep, retention,
// forming and manifest jobs at d, as River's JobTimeout caps a transcribe
// step: a test that kills a worker has its jobs taken over within d.
func (p *Pipeline) CapJobTimeouts(d time.Duration) { p.timeoutCap = d }
