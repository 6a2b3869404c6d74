package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
)

// A live-call runtime reports vendor refusals to `callscribe serve` over
// POST /v1/providers/{provider}/{kind}/refusals: each report below the
// limit lowers it to in_use − 1 and raises the alert everywhere it goes
// (the capacity.alerts webhook, /metrics, the status page); a report
// above the limit does nothing; a tenant's report is named and paced;
// requests without a valid token are 401; `capacity set-limit` restores
// the limit.
func TestServeReportedRefusalAlerts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	alerts := make(chan map[string]any, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Errorf("webhook body %q: %v", raw, err)
		}
		alerts <- m
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	nextAlert := func() map[string]any {
		t.Helper()
		select {
		case m := <-alerts:
			return m
		case <-time.After(30 * time.Second):
			t.Fatal("no alert at the webhook within 30s")
			return nil
		}
	}

	prov := fmt.Sprintf("refusing-%d-%d", os.Getpid(), capSeq.Add(1))
	rdb := testredis.Client(t)
	t.Cleanup(func() { testredis.DeleteMatching(rdb, "*{"+prov+"/*") })
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := fmt.Sprintf("capacity:\n  limits:\n    %[1]s/stt: {limit: 10}\n    %[1]s/tts: {limit: 6}\n  alerts:\n    webhook_url: %[2]s\n", prov, hook.URL)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool), csconfig.EnvRedisURL: testredis.URL(), csconfig.EnvAPIToken: serveTestToken}
	code, out, stderr := run(t, ctx, env, "--config", config, "tokens", "create", "--tenant", "northline")
	if code != 0 {
		t.Fatalf("tokens create: %s", stderr)
	}
	tenant := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])

	sctx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	var sout, serr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(sctx, []string{"--config", config, "serve", "--addr", "127.0.0.1:0", "--no-workers"},
			cli.Env{Stdout: &sout, Stderr: &serr, Getenv: envOf(env)})
	}()
	base := serveBase(t, &sout, &serr, done)
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+serveTestToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	report := func(token, kind string, inUse int) (int, map[string]any) {
		t.Helper()
		return postJSON(t, base+"/v1/providers/"+prov+"/"+kind+"/refusals", token, fmt.Sprintf(`{"in_use": %d}`, inUse))
	}
	wantReport := func(code int, got map[string]any, inUse, before, after float64, lowered bool) {
		t.Helper()
		if code != 200 || got["in_use"] != inUse || got["limit_before"] != before || got["limit_after"] != after || got["lowered"] != lowered {
			t.Fatalf("report: %d %v, want in_use %v, limit %v → %v, lowered %v", code, got, inUse, before, after, lowered)
		}
	}

	// An admin's report: tts 6 → 3; the webhook hears it.
	code, got := report(serveTestToken, "tts", 4)
	wantReport(code, got, 4, 6, 3, true)
	if a := nextAlert(); a["provider"] != prov || a["kind"] != "tts" || a["configured_limit"] != 6.0 || a["learned_limit"] != 3.0 || a["reporter"] != nil {
		t.Fatalf("alert %v", a)
	}
	// Above the limit in force: nothing.
	code, got = report(serveTestToken, "tts", 5)
	wantReport(code, got, 5, 3, 3, false)
	// The tenant's report: stt 10 → 4, named; again at once: 429.
	code, got = report(tenant, "stt", 5)
	wantReport(code, got, 5, 10, 4, true)
	if a := nextAlert(); a["kind"] != "stt" || a["learned_limit"] != 4.0 || a["reporter"] != "northline" {
		t.Fatalf("tenant's alert %v (the report above the limit must send none)", a)
	}
	if code, got = report(tenant, "stt", 2); code != http.StatusTooManyRequests {
		t.Fatalf("the tenant again at once: %d %v, want 429", code, got)
	}
	// Without a valid token: 401.
	for _, tok := range []string{"", "cs_1_" + strings.Repeat("0", 64)} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/providers/"+prov+"/tts/refusals", strings.NewReader(`{"in_use": 1}`))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: %d, want 401", tok, resp.StatusCode)
		}
	}

	// /metrics: one alert each, both delivered, the learned limits.
	wantMetrics := []string{
		fmt.Sprintf(`callscribe_capacity_learned_limit_alerts_total{kind="tts",provider=%q} 1`, prov),
		fmt.Sprintf(`callscribe_capacity_learned_limit_alerts_total{kind="stt",provider=%q} 1`, prov),
		`callscribe_capacity_alert_webhook_total{outcome="delivered"} 2`,
		fmt.Sprintf(`callscribe_capacity_learned_limit{kind="tts",provider=%q} 3`, prov),
		fmt.Sprintf(`callscribe_capacity_learned_limit{kind="stt",provider=%q} 4`, prov),
	}
	var metrics string
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	if !testwait.Until(30*time.Second, tick.C, func() bool {
		metrics = get("/metrics")
		for _, w := range wantMetrics {
			if !strings.Contains(metrics, w) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("/metrics lacks one of %q:\n%s", wantMetrics, metrics)
	}

	// The status page: the learned limits and a warning per drop.
	page := get("/status/data")
	for _, want := range []string{
		`<div class="provider" data-provider="` + prov + `" data-kind="tts">`,
		`in use of <span class="limit">3</span> <span class="warn">(learned; configured 6)</span>`,
		`in use of <span class="limit">4</span> <span class="warn">(learned; configured 10)</span>`,
		`<td>` + prov + `/tts</td><td>the vendor refused at 4 in use: limit 6 → 3</td>`,
		`<td>` + prov + `/stt</td><td>the vendor refused at 5 in use: limit 10 → 4 (reported by northline)</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Fatalf("status page lacks %q:\n%s", want, page)
		}
	}

	// The operator restores the limit.
	if code, _, stderr := run(t, ctx, env, "--config", config, "capacity", "set-limit", prov, "tts", "6"); code != 0 {
		t.Fatalf("set-limit: %s", stderr)
	}
	status := getJSON(t, base+"/v1/status", serveTestToken)
	for _, p := range status["providers"].([]any) {
		pm := p.(map[string]any)
		if pm["provider"] == prov && pm["kind"] == "tts" && (pm["effective_limit"] != 6.0 || pm["learned"] != false) {
			t.Fatalf("after set-limit: %v, want 6 not learned", pm)
		}
	}

	stopServe()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, serr.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatal("serve did not stop")
	}
}
