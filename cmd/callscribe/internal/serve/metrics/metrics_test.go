package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// scrape reads m's handler as Prometheus would.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rr.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rr.Code, rr.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(rr.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value is the value of the series of name whose labels include labels
// (name=value pairs); ok false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		}
	}
	return 0, false
}

type fixedCapacity []capacity.ProviderStatus

func (f fixedCapacity) Status(context.Context) ([]capacity.ProviderStatus, error) { return f, nil }

// The gauges read at scrape time say what the database holds: the oldest
// eligible recording's age by lane, active cooldowns, the outbox backlog,
// River's queues and the duplicate-key counter; and the capacity gauges
// what the capacity source says.
func TestDatabaseGauges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	clk := clock.NewStub(now)
	m := metrics.New(metrics.Config{Pool: pool, Clock: clk, Capacity: fixedCapacity{
		{Provider: "deepgram", Kind: "stt", InUse: 3, ConfiguredLimit: 10, EffectiveLimit: 6, Learned: true}}})

	// Nothing yet: both lanes at 0, no cooldown, no backlog.
	fams := scrape(t, m)
	for _, lane := range []string{"immediate", "batch"} {
		if v, ok := value(fams, "callscribe_oldest_eligible_age_seconds", "lane", lane); !ok || v != 0 {
			t.Errorf("empty ledger: oldest eligible %s = %v (%v), want 0", lane, v, ok)
		}
	}
	if v, ok := value(fams, "callscribe_duplicate_key_conflicts_total"); !ok || v != 0 {
		t.Errorf("duplicate-key conflicts = %v (%v), want 0", v, ok)
	}

	// An immediate recording made eligible; a batch one still received.
	var ids []string
	for i, lane := range []ledger.Lane{ledger.LaneImmediate, ledger.LaneBatch} {
		res, err := l.Ingest(ctx, ledger.NewRecording{TenantID: "t1", CallID: "call-" + string(rune('a'+i)),
			AudioSHA256: strings.Repeat(string(rune('a'+i)), 64), Lane: lane, AudioURI: "x.wav"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Recording.ID.String())
		if lane == ledger.LaneImmediate {
			if _, err := l.Transition(ctx, ledger.Transition{RecordingID: res.Recording.ID, From: ledger.StateReceived, To: ledger.StateEligible, Reason: "test"}); err != nil {
				t.Fatal(err)
			}
			rec, err := l.Recording(ctx, res.Recording.ID)
			if err != nil {
				t.Fatal(err)
			}
			clk.Set(rec.CreatedAt.Add(90 * time.Second))
		}
	}
	now = clk.Now()
	// One scope cooling down, one whose deadline passed, one paused.
	for scope, nb := range map[string]time.Time{"s-ahead": now.Add(time.Minute), "s-past": now.Add(-time.Minute)} {
		if _, err := l.ScopeDeferralExtend(ctx, ledger.Extension{Scope: scope, NotBefore: nb, Source: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.ScopePause(ctx, "s-paused", "quota"); err != nil {
		t.Fatal(err)
	}
	// Two outbox rows, one pending for 2 minutes, one dead; a River job
	// waiting in queue crm; 3 duplicate-key conflicts counted.
	var setID int64
	if err := pool.QueryRow(ctx, `INSERT INTO action_sets (recording_id, tenant_id, call_id, action_version, recording_sha256, actions, committed_at)
		VALUES ($1, 't1', 'call-a', 1, $2, '[]', $3) RETURNING id`, ids[0], strings.Repeat("a", 64), now).Scan(&setID); err != nil {
		t.Fatal(err)
	}
	for i, state := range []string{"pending", "dead"} {
		if _, err := pool.Exec(ctx, `INSERT INTO outbox (action_set_id, target, scope, idempotency_key, state, created_at, updated_at, deadline)
			VALUES ($1, $2, 'crm:t1', 'k', $3, $4, $4, $5)`, setID, []string{"webhook", "hubspot"}[i], state, now.Add(-2*time.Minute), now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, scheduled_at)
		VALUES ('{}', 'crm_deliver', 25, 'crm', 'available', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO counters (name, value) VALUES ($1, 3)`, outbox.CounterDuplicateKeyConflicts); err != nil {
		t.Fatal(err)
	}
	// A finished manifest of 2 items: one completed, one sent back.
	var manifestID string
	if err := pool.QueryRow(ctx, `INSERT INTO batch_manifests (id, manifest_key, tenant_id, provider, model, scope, state, items, created_at, updated_at)
		VALUES (gen_random_uuid(), 'm-1', 't1', 'generic-http', 'general', 's', 'done', 2, $1, $1) RETURNING id::text`, now).Scan(&manifestID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO batch_manifest_items (manifest_id, recording_id, business_key, position, state, updated_at)
		VALUES ($1, $2, 'k0', 1, 'completed', $4), ($1, $3, 'k1', 2, 'resubmit', $4)`, manifestID, ids[0], ids[1], now); err != nil {
		t.Fatal(err)
	}

	fams = scrape(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"callscribe_oldest_eligible_age_seconds", []string{"lane", "immediate"}, 90},
		{"callscribe_oldest_eligible_age_seconds", []string{"lane", "batch"}, 0},
		{"callscribe_scope_cooldowns_active", nil, 1},
		{"callscribe_scopes_paused", nil, 1},
		{"callscribe_outbox_backlog", nil, 1},
		{"callscribe_outbox_dead", nil, 1},
		{"callscribe_outbox_oldest_pending_age_seconds", nil, 120},
		{"callscribe_river_queue_depth", []string{"queue", "crm", "state", "available"}, 1},
		{"callscribe_river_queue_depth", []string{"queue", "crm", "state", "scheduled"}, 0},
		{"callscribe_duplicate_key_conflicts_total", nil, 3},
		{"callscribe_batch_manifests", []string{"state", "done"}, 1},
		{"callscribe_batch_manifests", []string{"state", "accepted"}, 0},
		{"callscribe_batch_items", []string{"state", "completed"}, 1},
		{"callscribe_batch_items", []string{"state", "resubmit"}, 1},
		{"callscribe_batch_partial_completions", nil, 1},
		{"callscribe_capacity_in_use", []string{"provider", "deepgram", "kind", "stt"}, 3},
		{"callscribe_capacity_limit", []string{"provider", "deepgram"}, 10},
		{"callscribe_capacity_effective_limit", []string{"provider", "deepgram"}, 6},
		{"callscribe_capacity_limit_learned", []string{"provider", "deepgram"}, 1},
	} {
		if v, ok := value(fams, c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if v, ok := value(fams, "callscribe_scrape_errors_total"); ok && v != 0 {
		t.Errorf("scrape errors = %v", v)
	}
	// Every metric has HELP text and the callscribe_ prefix (or is Go's).
	for name, f := range fams {
		if f.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
		if !strings.HasPrefix(name, "callscribe_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("%s: not a callscribe_ metric", name)
		}
	}
}

// A database that cannot be reached leaves its gauges out and counts the
// failure; the process's own metrics are still served.
func TestScrapeWithoutDatabase(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	m := metrics.New(metrics.Config{Pool: pool})
	m.VendorThrottled("generic-http", "s1", 429)
	pool.Close()
	fams := scrape(t, m)
	if _, ok := value(fams, "callscribe_outbox_backlog"); ok {
		t.Error("outbox backlog served from a closed pool")
	}
	if v, _ := value(fams, "callscribe_scrape_errors_total", "source", "database"); v != 1 {
		t.Errorf("scrape errors = %v, want 1", v)
	}
	if v, _ := value(fams, "callscribe_vendor_throttled_total", "provider", "generic-http", "scope", "s1", "status", "429"); v != 1 {
		t.Errorf("throttled = %v, want 1", v)
	}
}

// The recording methods feed their series; tenants past the configured
// count are "other"; a nil *Metrics records nothing.
func TestRecordingMethods(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{MaxTenantLabels: 2})
	for _, tenant := range []string{"a", "b", "c", "a", "d"} {
		m.Committed(tenant, "batch", 2, 3*time.Second)
		m.BillableAudio("deepgram", tenant, 1.5)
	}
	m.VendorFailed("deepgram", "transient")
	m.VendorCooldown("s", 2*time.Second)
	m.CRMThrottled("webhook", "crm:t1", 429)
	m.CRMCooldown("crm:t1", time.Second)
	m.CRMSettled("webhook", outbox.StateDelivered, 10*time.Second)
	m.CRMSettled("webhook", outbox.StateDead, 0)
	fams := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"callscribe_transcripts_committed_total", []string{"tenant", "a"}, 2},
		{"callscribe_transcripts_committed_total", []string{"tenant", "b"}, 1},
		{"callscribe_transcripts_committed_total", []string{"tenant", "other"}, 2},
		{"callscribe_billable_audio_seconds_total", []string{"provider", "deepgram", "tenant", "other"}, 3},
		{"callscribe_vendor_failed_attempts_total", []string{"outcome", "transient"}, 1},
		{"callscribe_crm_throttled_total", []string{"target", "webhook", "status", "429"}, 1},
		{"callscribe_crm_deliveries_total", []string{"state", "delivered"}, 1},
		{"callscribe_crm_deliveries_total", []string{"state", "dead"}, 1},
	} {
		if v, ok := value(fams, c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if _, ok := value(fams, "callscribe_transcripts_committed_total", "tenant", "c"); ok {
		t.Error("a third tenant got its own label")
	}
	h := fams["callscribe_submissions_per_transcript"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 5 || h.GetSampleSum() != 10 {
		t.Errorf("submissions histogram: count %d sum %v, want 5 and 10", h.GetSampleCount(), h.GetSampleSum())
	}
	if n := len(fams["callscribe_scope_cooldown_seconds"].GetMetric()); n != 2 {
		t.Errorf("cooldown histogram has %d series, want 2 (stt, crm)", n)
	}
	var none *metrics.Metrics
	none.Committed("a", "batch", 1, time.Second) // no panic
}

func TestTenantLabels(t *testing.T) {
	t.Parallel()
	tl := metrics.NewTenantLabels(1)
	if got := tl.Label("x"); got != "x" {
		t.Errorf("first = %q", got)
	}
	if got := tl.Label("y"); got != metrics.OtherTenant {
		t.Errorf("second = %q", got)
	}
	if got := tl.Label("x"); got != "x" {
		t.Errorf("first again = %q", got)
	}
	if got := metrics.NewTenantLabels(0).Label("x"); got != metrics.OtherTenant {
		t.Errorf("max 0 = %q", got)
	}
}
