package cli_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/crm/crmsim"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/internal/testredis"
	"github.com/callscribe/callscribe/internal/testwait"
	"github.com/callscribe/callscribe/outbox"
)

const (
	// crashRecordings: committed recordings (one action set each) the
	// crash tests replay.
	crashRecordings = 320
	// crashChunk: replay.chunk, so that enumerating takes many chunks.
	crashChunk = 25
	// crashKillAt: the staging CRM's new application at which the first
	// replay process is killed, mid-run.
	crashKillAt = crashRecordings / 3
	// crashBound bounds each wait for a replay process: a failure bound
	// only; an idle machine needs well under a minute.
	crashBound = 5 * time.Minute
)

// A `callscribe replay --wait` process, the real binary, is SIGKILLed in
// the middle of a run against a staging CRM double that throttles (429
// with Retry-After), fails (5xx) and resets connections after applying;
// `replay status` then shows the run unfinished, and `replay resume` in a
// new process finishes it: done, nothing dead, no new action version, no
// send inside a known cooldown, every set delivered once and applied by
// the CRM exactly once, and `replay status` afterwards shows what the
// resumed run printed.
//
//   - MidDelivery: killed by the CRM double itself at its crashKillAt-th
//     new application, between applying the set and answering (the worst
//     moment: the sender cannot know); the target scope's window is shared
//     through Redis, so the dead process's slots are in Redis too. The
//     resumed run's retry of that set is answered as a replay.
//   - DuringEnumeration: killed once the run's first chunk is enqueued,
//     its later chunks held (inside their transaction) at a gate the test
//     holds, a trigger on replay_runs, so that the kill is certain to find
//     the run enumerating; the resumed run enumerates the rest, each
//     recording enqueued and re-driven once.
func TestReplayKilledMidRunResumes(t *testing.T) {
	t.Parallel()
	bin := buildCallscribe(t)
	t.Run("MidDelivery", func(t *testing.T) {
		t.Parallel()
		replayKilledMidDelivery(t, bin)
	})
	t.Run("DuringEnumeration", func(t *testing.T) {
		t.Parallel()
		replayKilledDuringEnumeration(t, bin)
	})
}

func replayKilledMidDelivery(t *testing.T, bin string) {
	r := newCrashRig(t, bin, true)
	from, to := replayWindow()
	began := time.Now()
	first := r.command("replay", "--from", from, "--to", to, "--target", "staging", "--wait", "--json")
	first.start()
	applies := 0
	killedAt := make(chan string, 1)
	r.arm(func(key string) bool {
		if applies++; applies < crashKillAt {
			return true
		}
		killedAt <- key // before the kill: the process's exit below may be seen first
		first.kill()    // SIGKILL before the CRM answers: the set is applied, the sender never hears of it
		return false
	})
	var key string
	select {
	case key = <-killedAt:
	case <-first.exited:
		select {
		case key = <-killedAt: // the kill was the CRM double's: its exit won the select
		default:
		}
		if key != "" {
			break
		}
		t.Fatalf("the replay process exited before the CRM applied %d sets: %v\nstdout:\n%s\nstderr:\n%s",
			crashKillAt, first.err, first.stdout.String(), tail(first.stderr.String()))
	case <-time.After(crashBound):
		t.Fatalf("the CRM applied %d of %d sets in %s\nstderr:\n%s", r.crm.Stats().Applied, crashKillAt, crashBound, tail(first.stderr.String()))
	}
	id := first.waitKilled()
	killed := time.Now()

	// replay status: unfinished, some deliveries settled, some pending.
	st := r.status(id)
	if st.State != outbox.RunRunning && st.State != outbox.RunEnumerating {
		t.Errorf("replay status after the kill: state %q, want %s (or %s)", st.State, outbox.RunRunning, outbox.RunEnumerating)
	}
	if settled := st.Report.Deliveries - st.Report.Pending; st.Report.Pending == 0 || settled == 0 || settled >= int64(len(r.keys)) {
		t.Errorf("replay status after the kill: %d deliveries, %d pending; want some settled and some pending", st.Report.Deliveries, st.Report.Pending)
	}
	if state, outcome := r.delivery(id, key); state != outbox.StatePending {
		t.Errorf("the delivery of %s, applied by the CRM as the process was killed, is %s (%s) after the kill, want pending", key, state, outcome)
	}

	resumed := time.Now()
	done := r.resume(id)
	r.checkFinished(id, done)
	if state, outcome := r.delivery(id, key); state != outbox.StateDelivered || outcome != "replayed" {
		t.Errorf("the delivery of %s, applied as the process was killed, ended %s (%s); want delivered, answered as a replay", key, state, outcome)
	}
	t.Logf("killed at the CRM's application %d (%s) after %s, %d deliveries settled; resumed in %s: %d created, %d answered as replays, %d throttled, %d transient, %d tries",
		crashKillAt, key, killed.Sub(began).Round(time.Millisecond), st.Report.Deliveries-st.Report.Pending, time.Since(resumed).Round(time.Millisecond),
		done.Report.CRMEffectsCreated, done.Report.AnsweredAsReplays, done.Report.Throttled, done.Report.Transient, done.Report.Tries)
}

func replayKilledDuringEnumeration(t *testing.T, bin string) {
	r := newCrashRig(t, bin, false)
	changes := testwait.Changes(t, r.pool, "replay_runs")
	release := r.gateEnumeration()
	from, to := replayWindow()
	began := time.Now()
	first := r.command("replay", "--from", from, "--to", to, "--target", "staging", "--wait", "--json")
	first.start()
	ctx := context.Background()
	var state string
	var enumerated int64
	enqueuing := func() bool {
		select {
		case <-first.exited:
			return true
		default:
		}
		err := r.pool.QueryRow(ctx, "SELECT state, enumerated FROM replay_runs ORDER BY id LIMIT 1").Scan(&state, &enumerated)
		return err == nil && enumerated > 0
	}
	if !testwait.Until(crashBound, changes, enqueuing) || enumerated == 0 {
		t.Fatalf("the replay run enqueued no chunk in %s (%s)\nstderr:\n%s", crashBound, first.state(), tail(first.stderr.String()))
	}
	first.kill()
	id := first.waitKilled()
	killed := time.Now()
	release()

	st := r.status(id)
	if st.State != outbox.RunEnumerating || st.Enumerated != crashChunk {
		t.Errorf("replay status after the kill: state %q, %d recordings enumerated; want %s, the first chunk of %d",
			st.State, st.Enumerated, outbox.RunEnumerating, crashChunk)
	}

	resumed := time.Now()
	done := r.resume(id)
	r.checkFinished(id, done)
	t.Logf("killed while enumerating after %s (%d of %d enqueued, %d re-driven, %d deliveries); resumed in %s: %d created, %d answered as replays, %d throttled, %d transient",
		killed.Sub(began).Round(time.Millisecond), st.Enumerated, len(r.keys), st.Report.RecordingsReplayed, st.Report.Deliveries,
		time.Since(resumed).Round(time.Millisecond), done.Report.CRMEffectsCreated, done.Report.AnsweredAsReplays, done.Report.Throttled, done.Report.Transient)
}

// buildCallscribe builds the callscribe binary of this tree into a
// directory of t's.
func buildCallscribe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "callscribe")
	build := exec.Command("go", "build", "-o", bin, "github.com/callscribe/callscribe/cmd/callscribe")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building callscribe: %v\n%s", err, out)
	}
	return bin
}

// crashRig is a database with crashRecordings committed sets, a staging
// CRM double with trouble, and a configuration replaying into it.
type crashRig struct {
	t          *testing.T
	bin        string
	pool       *pgxpool.Pool
	dbURL      string
	configPath string
	crm        *crmsim.Server
	keys       []string

	mu    sync.Mutex
	armed func(key string) bool // called on each new application while it returns true
}

// newCrashRig prepares a rig; withRedis shares the target scope's window
// through the test Redis (under a scope of the test's own).
func newCrashRig(t *testing.T, bin string, withRedis bool) *crashRig {
	t.Helper()
	r := &crashRig{t: t, bin: bin, pool: testdb.New(t)}
	r.dbURL = testdb.URLOf(t, r.pool)
	seeding := time.Now()
	r.keys = commitSets(t, r.pool, "crashco", crashRecordings)
	t.Logf("%d recordings committed in %s", len(r.keys), time.Since(seeding).Round(time.Millisecond))
	sim, err := crmsim.New(crmsim.Config{Tokens: []string{"stg"},
		// 429 with Retry-After 1 (300ms rounded up to the second), 5xx
		// (a 503 with Retry-After), applied then reset.
		RateLimitShare: 0.10, Cooldown: 300 * time.Millisecond, ServerErrorShare: 0.05, DropAfterApplyShare: 0.05,
		OnApply: r.applied})
	if err != nil {
		t.Fatal(err)
	}
	r.crm = sim
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	target := fmt.Sprintf("{kind: webhook, base_url: %q, token: stg}", srv.URL)
	var redis string
	if withRedis {
		var b [6]byte
		_, _ = rand.Read(b[:])
		scope := "crm:replay:crash-" + hex.EncodeToString(b[:])
		rdb := testredis.Client(t)
		t.Cleanup(func() { testredis.DeleteMatching(rdb, "*"+scope+"*") })
		redis = fmt.Sprintf("redis_url: %q\n", testredis.URL())
		target = fmt.Sprintf("{kind: webhook, base_url: %q, token: stg, scope: %q}", srv.URL, scope)
	}
	r.configPath = filepath.Join(dir, "callscribe.yaml")
	body := redis + fmt.Sprintf(`log: {level: warn}
audio: {root: %q}
pipeline:
  rollout_default: enforce
  step_timeout: 3s
  rescue_after: 4s
  poll_interval: 50ms
  probe_wait: 50ms
retry_after: {base_backoff: 200ms, max_backoff: 2s}
replay: {chunk: %d}
crm_targets:
  staging: %s
`, dir, crashChunk, target)
	if err := os.WriteFile(r.configPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// applied is the CRM double's OnApply.
func (r *crashRig) applied(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.armed != nil && !r.armed(key) {
		r.armed = nil
	}
}

// arm calls f on each new application of the CRM double, until it returns
// false.
func (r *crashRig) arm(f func(key string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = f
}

// crashProc is a callscribe process of the rig.
type crashProc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	exited         chan struct{}
	err            error // once exited is closed
}

// command is callscribe --config <the rig's> args, not started yet.
func (r *crashRig) command(args ...string) *crashProc {
	p := &crashProc{t: r.t, exited: make(chan struct{})}
	p.cmd = exec.Command(r.bin, append([]string{"--config", r.configPath}, args...)...)
	// Only what the process needs: no CALLSCRIBE_* of the test's own
	// environment.
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
		config.EnvDatabaseURL + "=" + r.dbURL}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	return p
}

func (p *crashProc) start() {
	p.t.Helper()
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	p.t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if p.t.Failed() {
			p.t.Logf("%v: %s\nstderr:\n%s", p.cmd.Args[3:], p.state(), tail(p.stderr.String()))
		}
	})
}

// state says whether the process exited, and how.
func (p *crashProc) state() string {
	select {
	case <-p.exited:
		return fmt.Sprintf("exited: %v", p.err)
	default:
		return "still running"
	}
}

// kill sends SIGKILL: no goodbye, no cleanup.
func (p *crashProc) kill() { _ = p.cmd.Process.Kill() }

// wait waits for the process to exit by itself within d, else kills it.
func (p *crashProc) wait(d time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		p.kill()
		<-p.exited
		return fmt.Errorf("killed after %s (%w)", d, p.err)
	}
}

var replayRunLine = regexp.MustCompile(`replay run (\d+) to staging: `)

// waitKilled waits for a killed replay process to end, checks that the
// kill ended it, and returns its run's id as it printed it.
func (p *crashProc) waitKilled() int64 {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		p.t.Fatal("the replay process has not ended a minute after SIGKILL")
	}
	var exit *exec.ExitError
	if !errors.As(p.err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		p.t.Fatalf("the replay process ended with %v, not by the kill\nstdout:\n%s\nstderr:\n%s", p.err, p.stdout.String(), tail(p.stderr.String()))
	}
	m := replayRunLine.FindStringSubmatch(p.stderr.String())
	if m == nil {
		p.t.Fatalf("the replay process printed no run id on stderr:\n%s", tail(p.stderr.String()))
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		p.t.Fatal(err)
	}
	return id
}

// status is `replay status id --json`, in this process.
func (r *crashRig) status(id int64) outbox.ReplayRun {
	r.t.Helper()
	env := map[string]string{config.EnvDatabaseURL: r.dbURL}
	code, out, stderr := run(r.t, context.Background(), env, "--config", r.configPath, "replay", "status", strconv.FormatInt(id, 10), "--json")
	var run outbox.ReplayRun
	if err := json.Unmarshal([]byte(out), &run); code != 0 || err != nil {
		r.t.Fatalf("replay status %d --json: exit %d, %v\n%s\n%s", id, code, err, out, stderr)
	}
	return run
}

// resume is `replay resume id --wait --json` in a new process, to its
// end; it returns the run the process printed.
func (r *crashRig) resume(id int64) outbox.ReplayRun {
	r.t.Helper()
	p := r.command("replay", "resume", strconv.FormatInt(id, 10), "--wait", "--json")
	p.start()
	err := p.wait(crashBound)
	var run outbox.ReplayRun
	if jerr := json.Unmarshal([]byte(p.stdout.String()), &run); err != nil || jerr != nil {
		r.t.Fatalf("replay resume %d --wait --json: %v (%v)\nstdout:\n%s\nstderr:\n%s", id, err, jerr, p.stdout.String(), tail(p.stderr.String()))
	}
	return run
}

// checkFinished checks run id as the resumed process printed it (done):
// finished cleanly, each set delivered once, applied by the CRM once, each
// recording enqueued and re-driven once; `replay status` shows the same.
func (r *crashRig) checkFinished(id int64, done outbox.ReplayRun) {
	t := r.t
	t.Helper()
	n := int64(len(r.keys))
	rep := done.Report
	if done.State != outbox.RunDone || rep.Dead != 0 || rep.NewActionVersions != 0 || rep.Sends.IgnoredKnownCooldown != 0 || rep.Pending != 0 {
		t.Errorf("resumed run: state %s, %d dead %v, %d new action versions, %d sent inside a known cooldown, %d pending; want done, 0, 0, 0",
			done.State, rep.Dead, rep.DeadList, rep.NewActionVersions, rep.Sends.IgnoredKnownCooldown, rep.Pending)
	}
	if rep.Deliveries != n || rep.CRMEffectsCreated+rep.AnsweredAsReplays != rep.Deliveries {
		t.Errorf("resumed run: %d deliveries (%d created, %d answered as replays), want %d, each created or answered as a replay",
			rep.Deliveries, rep.CRMEffectsCreated, rep.AnsweredAsReplays, n)
	}
	if done.Enumerated != n || rep.RecordingsReplayed != n {
		t.Errorf("resumed run: %d recordings enumerated, %d replayed; want %d, each once", done.Enumerated, rep.RecordingsReplayed, n)
	}
	if rep.Tries < rep.Deliveries || rep.Throttled+rep.Transient == 0 {
		t.Errorf("resumed run: %d tries, %d throttled, %d transient: the double's trouble was not met", rep.Tries, rep.Throttled, rep.Transient)
	}
	if after := r.status(id); !reflect.DeepEqual(after, done) {
		a, _ := json.Marshal(after)
		d, _ := json.Marshal(done)
		t.Errorf("replay status %d after the resumed run differs from what it printed:\nstatus: %s\nresume: %s", id, a, d)
	}
	// Each committed set became one delivery with one job (the chunks of
	// finished recordings re-drive them in their own transaction).
	var jobs, sets int64
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT args->>'action_set_id') FROM river_job
WHERE kind = 'replay_deliver' AND (args->>'run_id')::bigint = $1`, id).Scan(&jobs, &sets); err != nil {
		t.Fatal(err)
	}
	if jobs != int64(len(r.keys)) || sets != int64(len(r.keys)) {
		t.Errorf("%d replay_deliver jobs for %d sets, want one for each of %d", jobs, sets, len(r.keys))
	}

	st := r.crm.Stats()
	if st.Applied != len(r.keys) || st.Conflicts != 0 || len(st.ApplyCount) != len(r.keys) {
		t.Errorf("the staging CRM applied %d sets (%d keys), %d conflicts; want %d, 0", st.Applied, len(st.ApplyCount), st.Conflicts, len(r.keys))
	}
	for _, k := range r.keys {
		if c := st.ApplyCount[k]; c != 1 {
			t.Errorf("the staging CRM applied %s %d times, want once", k, c)
		}
	}
	if int64(st.Replays) < rep.AnsweredAsReplays {
		t.Errorf("the run counts %d answers as replays, the CRM gave %d", rep.AnsweredAsReplays, st.Replays)
	}
}

// delivery is the state and outcome of the delivery of the set of
// idempotency key key in run id.
func (r *crashRig) delivery(id int64, key string) (state, outcome string) {
	r.t.Helper()
	parts := strings.Split(key, ":")
	version, err := strconv.Atoi(parts[len(parts)-1])
	if err != nil || len(parts) != 3 {
		r.t.Fatalf("idempotency key %q: want tenant:call:version", key)
	}
	if err := r.pool.QueryRow(context.Background(), `SELECT d.state, d.outcome FROM replay_deliveries d
JOIN action_sets s ON s.id = d.action_set_id
WHERE d.run_id = $1 AND s.tenant_id = $2 AND s.call_id = $3 AND s.action_version = $4`,
		id, parts[0], parts[1], version).Scan(&state, &outcome); err != nil {
		r.t.Fatalf("the delivery of %s in run %d: %v", key, id, err)
	}
	return state, outcome
}

// crashGateKey is the advisory lock of gateEnumeration.
const crashGateKey = 0x72706c6761746501

// gateEnumeration makes every chunk of a replay run after its first wait,
// inside its transaction, until release is called: a trigger on
// replay_runs takes a shared advisory lock that the test holds
// exclusively. release lets the waiting transaction go on (a killed
// process's transaction then rolls back) and removes the gate.
func (r *crashRig) gateEnumeration() (release func()) {
	t := r.t
	t.Helper()
	ctx := context.Background()
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, uerr := conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
			conn.Release()
			if uerr != nil {
				t.Errorf("releasing the enumeration gate: %v", uerr)
				return
			}
			// Waits for the killed process's gated transaction to roll back.
			if _, err := r.pool.Exec(ctx, "DROP TRIGGER IF EXISTS replay_crash_gate ON replay_runs"); err != nil {
				t.Errorf("removing the enumeration gate: %v", err)
			}
		})
	}
	t.Cleanup(release)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(crashGateKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.pool.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION replay_crash_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF OLD.state = 'enumerating' AND OLD.enumerated > 0 AND NEW.cursor_id IS DISTINCT FROM OLD.cursor_id THEN
		PERFORM pg_advisory_xact_lock_shared(%d);
	END IF;
	RETURN NEW;
END $$`, int64(crashGateKey))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.pool.Exec(ctx, `CREATE TRIGGER replay_crash_gate BEFORE UPDATE ON replay_runs
FOR EACH ROW EXECUTE FUNCTION replay_crash_gate()`); err != nil {
		t.Fatal(err)
	}
	return release
}
