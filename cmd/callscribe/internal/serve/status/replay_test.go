package status_test

import (
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/status"
)

// The "Replay runs" section shows a row per active run with its figures,
// marks a send inside a known cooldown and dead deliveries, escapes what
// it shows, and says so when no run is active.
func TestRenderReplayRuns(t *testing.T) {
	t.Parallel()
	s := demo()
	s.ReplayRuns = []status.ReplayRun{
		{ID: 12, Target: "staging", State: "running", StartedBy: "ops@host-1", Started: t0.Add(-90 * time.Second),
			Replayed: 15, Enumerated: 16, Settled: 13, Deliveries: 14, CRMEffectsCreated: 6, AnsweredAsReplays: 5,
			Throttled: 2, Transient: 3, Dead: 4},
		{ID: 13, Target: `<script>alert(1)</script>`, State: "enumerating", StartedBy: `"><img onerror=x>`, Started: t0,
			Enumerated: 500, SentInsideKnownCooldown: 1},
	}
	var b strings.Builder
	if err := status.RenderSections(&b, s); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<section id="replay-runs"><h2>Replay runs</h2>`,
		`<tr class="replay-run" data-run="12" data-target="staging"><td class="n">12</td><td>staging</td><td>running</td>`,
		`<td class="n replayed">15 / 16</td><td class="n settled">13 / 14</td>`,
		`<td class="n created">6</td><td class="n answered">5</td><td class="n throttled">2</td><td class="n transient">3</td>`,
		`<td class="n dead bad">4</td><td class="n inside-cooldown">0</td>`,
		`<td>ops@host-1</td><td class="n">1m30s</td></tr>`,
		`<td class="n replayed">0 / 500</td>`, `<td class="n inside-cooldown bad">1</td>`,
		`&lt;script&gt;alert(1)&lt;/script&gt;`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %s", want)
		}
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img") {
		t.Error("a run's text is not escaped")
	}
	if strings.Contains(page, "No replay run is active") {
		t.Error("runs are active, yet the page says none is")
	}

	s.ReplayRuns = nil
	b.Reset()
	if err := status.RenderSections(&b, s); err != nil {
		t.Fatal(err)
	}
	if page := b.String(); !strings.Contains(page, `<section id="replay-runs"><h2>Replay runs</h2>`+"\n"+`<p class="muted">No replay run is active.</p></section>`) ||
		strings.Contains(page, `class="replay-run"`) {
		t.Errorf("no run active: the section does not say so\n%s", page)
	}
}
