package cli_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/chromedp/chromedp"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/headless"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// The status page in headless Chromium: serve with real services,
// recordings ingested over the API against a throttling vendor, an admin
// signed in through the page's form; the page shows the counts, the
// scope's cooldown and the capacity chart's bars.
func TestStatusPageInBrowser(t *testing.T) {
	t.Parallel()
	genericHTTPSlots.Lock() // its worker counts generic-http/stt slots in the shared Redis
	t.Cleanup(genericHTTPSlots.Unlock)
	if _, err := headless.Path(); err != nil {
		t.Fatal(err) // not skipped: the browser test must run
	}
	ctx := context.Background()
	pool := testdb.New(t)
	sim, err := sttsim.New(sttsim.Config{RateLimitShare: 0.4, Cooldown: 40 * time.Second, Rand: rand.New(rand.NewPCG(7, 11))})
	if err != nil {
		t.Fatal(err)
	}
	stt := httptest.NewServer(sim.Handler())
	defer stt.Close()
	recordings, _ := filepath.Abs("../../../testdata/recordings")
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "audio: {root: " + recordings + "}\n" +
		"capacity:\n  limits:\n    generic-http/stt: {limit: 2, batch_reserve: 1}\n" +
		"pipeline:\n  rollout_default: enforce\n  poll_interval: 50ms\n  probe_wait: 50ms\n  tenants:\n" +
		"    northline: {provider: generic-http, base_url: '" + stt.URL + "', api_key: sim-key}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool), csconfig.EnvRedisURL: testredis.URL()}
	tokenOf := func(args ...string) string {
		code, out, stderr := run(t, ctx, env, append([]string{"--config", config, "tokens", "create"}, args...)...)
		if code != 0 {
			t.Fatalf("tokens create: %s", stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1]
	}
	tenant, admin := tokenOf("--tenant", "northline"), tokenOf("--admin")

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sout, serr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(sctx, []string{"--config", config, "serve", "--addr", "127.0.0.1:0"}, cli.Env{Stdout: &sout, Stderr: &serr, Getenv: envOf(env)})
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(45 * time.Second):
			t.Error("serve did not stop within 45s")
		}
	}()
	base := serveBase(t, &sout, &serr, done)
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i := 1001; i <= 1008; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/recordings",
			strings.NewReader(fmt.Sprintf(`{"call_id":"call-%d","audio":"northline/call-1001.wav","lane":"immediate"}`, i)))
		req.Header.Set("Authorization", "Bearer "+tenant)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create call-%d: %d", i, resp.StatusCode)
		}
	}
	if code, _ := get("/", tenant); code != 401 {
		t.Fatalf("the status page with a tenant's token: %d, want 401", code)
	}
	if code, _ := get("/v1/status", admin); code != 200 {
		t.Fatalf("the capacity API beside the page: %d", code)
	}
	// Wait (bounded) for a commit and a cooldown, as the page's data says.
	committed := regexp.MustCompile(`data-state="committed">([1-9]\d*)</td>`)
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, page := get("/status/data", admin)
		if code == 200 && committed.MatchString(page) && strings.Contains(page, `<tr class="cooldown"`) && strings.Contains(page, `<rect class="bar`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no commit, cooldown and chart bar after 120s (%d):\n%s\n%s", code, page, serr.String())
		}
	}

	bctx, stop, err := headless.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	bctx, bcancel := context.WithTimeout(bctx, 60*time.Second)
	defer bcancel()
	var signInTitle string
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
	); err != nil {
		t.Fatalf("the sign-in page: %v", err)
	}
	if signInTitle, err = chromedp.Run(bctx, chromedp.Title()); err != nil || !strings.Contains(signInTitle, "sign in") {
		t.Fatalf("title %q (%v), want the sign-in page", signInTitle, err)
	}
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("token"), admin),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("sections")),
	); err != nil {
		t.Fatalf("signing in: %v", err)
	}
	type shown struct {
		Committed  int    `json:"committed"`
		Total      int    `json:"total"`
		Cooldown   string `json:"cooldown"`
		Bars       int    `json:"bars"`
		Limit      string `json:"limit"`
		Provider   string `json:"provider"`
		Refreshes  int    `json:"refreshes"`
		HasCookies bool   `json:"has_cookies"`
	}
	read := `(() => {
		const q = s => document.querySelector(s);
		const row = q('tr.recording-row[data-tenant="northline"][data-lane="immediate"]');
		const cell = row && row.querySelector('td[data-state="committed"]');
		return {
			committed: cell ? Number(cell.textContent) : 0,
			total: row ? Number(row.querySelector('td.total').textContent) : 0,
			cooldown: q('tr.cooldown') ? q('tr.cooldown').dataset.scope : "",
			bars: document.querySelectorAll('svg.peaks rect.bar').length,
			limit: q('svg.peaks line.limit') ? q('svg.peaks line.limit').dataset.limit : "",
			provider: q('div.provider') ? q('div.provider').dataset.provider + "/" + q('div.provider').dataset.kind : "",
			refreshes: Number(q('#sections').dataset.refreshes || 0),
			has_cookies: document.cookie !== "",
		};
	})()`
	got, err := chromedp.Run(bctx, chromedp.Evaluate[shown](read))
	if err != nil {
		t.Fatal(err)
	}
	if got.Committed < 1 || got.Total != 8 || got.Cooldown == "" || got.Bars < 1 || got.Limit == "" ||
		got.Provider != "generic-http/stt" || got.HasCookies {
		t.Fatalf("the page shows %+v; want the 8 recordings with a commit, a cooldown, chart bars against the limit, and no cookie readable by script", got)
	}
	// It refreshes itself without a reload.
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`Number(document.querySelector('#sections').dataset.refreshes || 0) >= 1`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page did not refresh its sections: %v", err)
	}
}
