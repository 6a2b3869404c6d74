package metrics_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
	"github.com/callscribe/callscribe/internal/testdb"
)

// alertRules is docs/prometheus/alerts.yml, the rules `make rules` checks
// with promtool; dashboard is docs/grafana/callscribe.json.
var (
	alertRules = filepath.Join("..", "..", "..", "..", "..", "docs", "prometheus", "alerts.yml")
	dashboard  = filepath.Join("..", "..", "..", "..", "..", "docs", "grafana", "callscribe.json")
)

// describedOnly stands in for a source whose gauges are only described
// here: Describe announces their names, and nothing is collected.
type describedOnly struct {
	metrics.CapacityStatus
	metrics.GateSource
}

// exportedNames are the metric names a fully configured process's
// registry announces (every family, with or without series yet): the
// database's, Redis's, the gate's and the replay runs' gauges, the
// counters read through functions, and the per-process collectors.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	one := func() int64 { return 0 }
	unsigned := func() uint64 { return 0 }
	src := describedOnly{}
	m := metrics.New(metrics.Config{
		Pool: testdb.New(t), Capacity: src, Gate: src,
		FailOpen: map[string]func() int64{"gate": one}, AuthFailures: unsigned,
		AuthCacheAccepted: map[string]func() uint64{"cache": unsigned}, LimitAlertWebhook: map[string]func() int64{"delivered": one},
		Cooldowns:  func(context.Context, time.Time) (int, int, error) { return 0, 0, nil },
		ReplayRuns: func(context.Context) ([]metrics.ReplayRun, error) { return nil, nil },
	})
	descs := make(chan *prometheus.Desc)
	go func() {
		defer close(descs)
		m.Describe(descs)
	}()
	names := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if s := fq.FindStringSubmatch(d.String()); s != nil {
			names[s[1]] = true
		}
	}
	return names
}

// metricName finds the metric names in a PromQL expression: every metric
// of callscribe starts with callscribe_.
var metricName = regexp.MustCompile(`\bcallscribe_[a-z0-9_]+`)

// unknownMetrics returns the names in expr that names does not hold (a
// histogram's _bucket, _sum and _count series count as its name's).
func unknownMetrics(expr string, names map[string]bool) []string {
	var out []string
	for _, n := range metricName.FindAllString(expr, -1) {
		base := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suffix); ok && names[b] {
				base = b
			}
		}
		if !names[base] && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Every expression of the alert rules names only metrics /metrics
// exports, so a renamed metric cannot leave an alert that never fires.
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	t.Parallel()
	names := exportedNames(t)
	if len(names) < 40 {
		t.Fatalf("the registry announced %d metric names; expected every family (at least 40): %v", len(names), names)
	}
	raw, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", alertRules, err)
	}
	rules := 0
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			rules++
			if len(metricName.FindAllString(r.Expr, -1)) == 0 {
				t.Errorf("alert %s names no callscribe metric: %q", r.Alert, r.Expr)
			}
			if bad := unknownMetrics(r.Expr, names); len(bad) > 0 {
				t.Errorf("alert %s names metrics /metrics does not export: %v", r.Alert, bad)
			}
		}
	}
	if rules < 10 {
		t.Errorf("%s holds %d rules; expected the 10 of docs/operations.md's rollout signals", alertRules, rules)
	}
	t.Run("an unknown name is reported", func(t *testing.T) {
		t.Parallel()
		expr := `sum(rate(callscribe_vendor_throttled_total[5m])) / sum(rate(callscribe_submissions_per_transcript_count[5m])) + callscribe_no_such_metric_total`
		if got := unknownMetrics(expr, names); !slices.Equal(got, []string{"callscribe_no_such_metric_total"}) {
			t.Errorf("unknownMetrics(%q) = %v, want [callscribe_no_such_metric_total]", expr, got)
		}
	})
}

// grafanaPanel is what the test reads of a dashboard's panel: its
// queries, and the panels of a row.
type grafanaPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

// Every query of the Grafana dashboard names only metrics /metrics
// exports, and every panel but a row has one.
func TestDashboardNamesExportedMetrics(t *testing.T) {
	t.Parallel()
	names := exportedNames(t)
	raw, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Title  string         `json:"title"`
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	queries := 0
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, q := range p.Targets {
				queries++
				if len(metricName.FindAllString(q.Expr, -1)) == 0 {
					t.Errorf("panel %q: a query names no callscribe metric: %q", p.Title, q.Expr)
				}
				if bad := unknownMetrics(q.Expr, names); len(bad) > 0 {
					t.Errorf("panel %q names metrics /metrics does not export: %v", p.Title, bad)
				}
			}
		}
	}
	walk(doc.Panels)
	if queries < 20 {
		t.Errorf("%s holds %d queries; expected the rollout signals, cost and capacity (at least 20)", dashboard, queries)
	}
}
