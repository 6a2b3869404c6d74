package serve

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/app"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
)

// NewMetrics bounds tenant labels by metrics.max_tenant_labels, and a
// process without a pool serves no global gauge.
func TestNewMetrics(t *testing.T) {
	t.Parallel()
	a := &app.App{Config: config.Config{Metrics: config.MetricsConfig{MaxTenantLabels: 1}}}
	m := NewMetrics(a, MetricsSources{})
	m.Committed("t1", "batch", 1, time.Second)
	m.Committed("t2", "batch", 1, time.Second)
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rr.Body.String()
	for _, want := range []string{`callscribe_transcripts_committed_total{tenant="t1"} 1`, `callscribe_transcripts_committed_total{tenant="other"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, "callscribe_outbox_backlog") || strings.Contains(body, "callscribe_capacity_in_use") {
		t.Error("a process without a pool serves the global gauges")
	}
}
