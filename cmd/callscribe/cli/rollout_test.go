package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// Cohort "early" observes because nobody set it (a new cohort observes:
// pipeline.rollout_default), "late" is set to enforce at run time: against
// a vendor that throttles half the time, the observed cohort's submissions
// go out inside cooldowns the platform recorded (what enforcement would
// have held back), the enforced cohort's never do; `rollout report` says
// so, and `rollout list` shows the modes, the default one marked.
func TestRolloutCohorts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	changes := testwait.Changes(t, pool, "recordings")
	sim, err := sttsim.New(sttsim.Config{APIKeys: []string{"key-early", "key-late"}, RateLimitShare: 0.5, Cooldown: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stt := httptest.NewServer(sim.Handler())
	defer stt.Close()
	recordings, _ := filepath.Abs("../../../testdata/recordings")
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "audio: {root: " + recordings + "}\nretry_after: {base_backoff: 50ms, max_backoff: 300ms}\n" +
		"pipeline:\n  poll_interval: 50ms\n  probe_wait: 50ms\n  tenants:\n" +
		"    northline: {provider: generic-http, base_url: '" + stt.URL + "', api_key: key-early, account: early, cohort: early}\n" +
		"    ridgeway: {provider: generic-http, base_url: '" + stt.URL + "', api_key: key-late, account: late, cohort: late}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	c := func(args ...string) (int, string, string) {
		return run(t, ctx, env, append([]string{"--config", config}, args...)...)
	}
	if code, _, stderr := c("rollout", "set", "late", "sometimes"); code == 0 || !strings.Contains(stderr, "observe or enforce") {
		t.Fatalf("rollout set with a bad mode: %d %q", code, stderr)
	}
	if code, _, stderr := c("rollout", "set", "late", "enforce", "--reason", "first enforced cohort"); code != 0 {
		t.Fatalf("rollout set: %s", stderr)
	}
	for round := range 3 {
		for i := 1; i <= 4; i++ {
			for _, tc := range []struct{ tenant, prefix string }{{"northline", "call-100"}, {"ridgeway", "call-300"}} {
				audio := fmt.Sprintf("%s/%s%d.wav", tc.tenant, tc.prefix, i)
				if code, _, stderr := c("ingest", "--tenant", tc.tenant, "--call", fmt.Sprintf("r%d-%d", round, i), "--audio", audio); code != 0 {
					t.Fatalf("ingest: %s", stderr)
				}
			}
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	var werr syncBuffer
	go func() {
		done <- cli.Run(wctx, []string{"--config", config, "worker"}, cli.Env{Stdout: &syncBuffer{}, Stderr: &werr, Getenv: envOf(env)})
	}()
	committed := func() bool {
		var n int
		_ = pool.QueryRow(ctx, "SELECT count(*) FROM recordings WHERE state = 'committed'").Scan(&n)
		return n == 24
	}
	if !testwait.Until(120*time.Second, changes, committed) {
		t.Fatalf("not all committed after 120s\n%s", werr.String())
	}
	stop()
	<-done

	code, out, stderr := c("rollout", "report", "--json")
	if code != 0 {
		t.Fatalf("rollout report: %s", stderr)
	}
	var rep struct {
		Cohorts []struct {
			Cohort               string   `json:"cohort"`
			Mode                 string   `json:"mode"`
			Stored               bool     `json:"stored"`
			Tenants              []string `json:"tenants"`
			Submissions          int      `json:"submissions"`
			IgnoredKnownCooldown int      `json:"ignored_known_cooldown"`
			Throttled            int      `json:"throttled"`
		} `json:"cohorts"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Cohorts) != 2 {
		t.Fatalf("report: %v\n%s", err, out)
	}
	early, late := rep.Cohorts[0], rep.Cohorts[1]
	if early.Cohort != "early" || early.Mode != "observe" || early.Stored || late.Cohort != "late" || late.Mode != "enforce" || !late.Stored ||
		len(early.Tenants) != 1 || early.Tenants[0] != "northline" {
		t.Fatalf("cohorts: %+v", rep.Cohorts)
	}
	if early.Submissions < 12 || early.Throttled == 0 || early.IgnoredKnownCooldown == 0 {
		t.Fatalf("observed cohort: %+v, want submissions that ignored known cooldowns (what enforcement would have held back)", early)
	}
	if late.Submissions < 12 || late.IgnoredKnownCooldown != 0 {
		t.Fatalf("enforced cohort: %+v, want none that ignored a known cooldown (the exact rule)", late)
	}
	code, out, stderr = c("rollout", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^early +observe \(default\) +northline$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^late +enforce +ridgeway$`).MatchString(out) {
		t.Fatalf("rollout list: %d\n%s%s", code, out, stderr)
	}
}
