// Command chaos is `make chaos`: the pipeline end to end while its workers
// are SIGKILLed over and over, on a machine kept busy by CPU hogs, against
// test doubles written apart from the project's own simulators, then a
// report of the guarantees that must hold. It is a development tool, no
// part of the callscribe binary:
//
//	go run ./internal/cmd/testenv --hogs 2 -- go run ./internal/cmd/chaos [flags]
//
// It builds callscribe, creates a fresh database chaos_<pid> on the
// PostgreSQL of TEST_DATABASE_URL (dropped at the end unless --keep),
// migrates it, empties a dedicated Redis database (index 9 of the server
// of TEST_REDIS_URL by default; never index 0), starts the doubles of
// doubles.py (an stt-http/v1 vendor that throttles with cooldowns
// announced by Retry-After in delay-seconds and IMF-fixdate form, and a
// crm-webhook/v1 CRM that throttles and fails now and then; Python
// standard library only, independent of jobs/stt/sttsim and crm/crmsim),
// writes WAV recordings and a configuration, ingests them with `ingest
// --manifest`, runs --workers `callscribe worker` processes and SIGKILLs a
// random one every --kill-min..--kill-max, restarting it at once, --kills
// times. Then it lets the workers finish until every recording is
// committed and every action set delivered (--settle-timeout), and checks:
//
//   - every recording committed, with one action set and one delivered
//     outbox row each;
//   - the vendor double transcribed each recording's key exactly once and
//     nothing else;
//   - the CRM double applied each action set's key exactly once, with no
//     conflicting body;
//   - `callscribe scopes audit`: no submission ignored a known cooldown
//     (the exact rule of docs/design.md, "Known cooldowns, exactly");
//   - no worker exited on its own.
//
// It prints the audit's in-flight count and admission-to-send gap, and the
// vendor double's own count of arrivals inside cooldowns it had announced
// (in-flight late arrivals, counted apart: allowed). It exits 1 if an
// invariant broke, with the recordings concerned and their `jobs show`.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/devservice"
	"github.com/callscribe/callscribe/internal/pgsession"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// options are the command line's.
type options struct {
	recordings              int
	kills                   int
	workers                 int
	killMin, killMax        time.Duration
	rateLimitShare          float64
	cooldownMin             time.Duration
	cooldownMax             time.Duration
	crm429Share, crm503     float64
	seed                    uint64
	databaseURL, redisURL   string
	keep                    bool
	settleTimeout           time.Duration
	poolConns               int
	logLevel                string
	python, doubles, binary string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.IntVar(&o.recordings, "recordings", 300, "recordings to ingest")
	fs.IntVar(&o.kills, "kills", 60, "worker SIGKILLs (each followed by a restart)")
	fs.IntVar(&o.workers, "workers", 3, "callscribe worker processes")
	fs.DurationVar(&o.killMin, "kill-min", 200*time.Millisecond, "shortest pause between two kills")
	fs.DurationVar(&o.killMax, "kill-max", 500*time.Millisecond, "longest pause between two kills")
	fs.Float64Var(&o.rateLimitShare, "rate-limit-share", 0.2, "share of submissions the vendor double answers 429 with a new cooldown")
	fs.DurationVar(&o.cooldownMin, "cooldown-min", time.Second, "shortest cooldown the vendor double announces")
	fs.DurationVar(&o.cooldownMax, "cooldown-max", 2*time.Second, "longest cooldown the vendor double announces (an IMF-fixdate rounds it up to a whole second)")
	fs.Float64Var(&o.crm429Share, "crm-429-share", 0.05, "share of deliveries the CRM double answers 429")
	fs.Float64Var(&o.crm503, "crm-503-share", 0.05, "share of deliveries the CRM double answers 503")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the audio, the kill schedule and the doubles' draws (0: from the clock); timing is never reproducible")
	fs.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL server to create the run's database on (default $TEST_DATABASE_URL, else "+devservice.TestDatabaseURLDefault+")")
	fs.StringVar(&o.redisURL, "redis-url", "", "Redis database the run empties and uses (default: index 9 of $TEST_REDIS_URL's server, else redis://127.0.0.1:6379/9); index 0 is refused")
	fs.BoolVar(&o.keep, "keep", false, "keep the database, the Redis keys and the work directory")
	fs.DurationVar(&o.settleTimeout, "settle-timeout", 5*time.Minute, "after the last kill, how long every recording may take to be committed and delivered")
	fs.IntVar(&o.poolConns, "pool-conns", 10, "pool_max_conns of each worker process (the server's max_connections is shared)")
	fs.StringVar(&o.logLevel, "log-level", "warn", "the workers' log.level")
	fs.StringVar(&o.python, "python", "python3", "the Python 3 interpreter of the doubles")
	fs.StringVar(&o.doubles, "doubles", "internal/cmd/chaos/doubles.py", "the doubles' program")
	fs.StringVar(&o.binary, "bin", "", "a callscribe binary to use (default: go build ./cmd/callscribe into the work directory)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.recordings < 1, o.workers < 1, o.kills < 0:
		return o, errors.New("--recordings and --workers must be at least 1, --kills at least 0")
	case o.killMin <= 0 || o.killMax < o.killMin:
		return o, errors.New("--kill-min must be positive and at most --kill-max")
	case o.cooldownMin <= 0 || o.cooldownMax < o.cooldownMin:
		return o, errors.New("--cooldown-min must be positive and at most --cooldown-max")
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	if o.databaseURL == "" {
		o.databaseURL = cmpOr(os.Getenv(devservice.TestDatabaseURLEnv), devservice.TestDatabaseURLDefault)
	}
	if o.redisURL == "" {
		u, err := redisIndex(cmpOr(os.Getenv(devservice.TestRedisURLEnv), devservice.TestRedisURLDefault), 9)
		if err != nil {
			return o, err
		}
		o.redisURL = u
	}
	return o, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// redisIndex is raw with its database index set to db.
func redisIndex(raw string, db int) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("redis URL: %w", err)
	}
	switch u.Scheme {
	case "redis", "rediss":
		u.Path = "/" + strconv.Itoa(db)
	case "unix":
		q := u.Query()
		q.Set("db", strconv.Itoa(db))
		u.RawQuery = q.Encode()
	default:
		return "", fmt.Errorf("redis URL %s: scheme %q", devservice.RedactURL(raw), u.Scheme)
	}
	return u.String(), nil
}

// say prints a progress line on stderr.
func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", args...)
}

func run(ctx context.Context, args []string) int {
	o, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	c := &chaos{o: o, rng: rand.New(rand.NewPCG(o.seed, 0x63_68_61_6f_73))}
	broken, err := c.run(ctx)
	c.keepWork = c.o.keep || broken || err != nil
	c.cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: FAILED:", err)
		return 1
	}
	if broken {
		return 1
	}
	return 0
}

// chaos is one run.
type chaos struct {
	o   options
	rng *rand.Rand

	start       time.Time
	work        string // the work directory
	keepWork    bool   // kept: --keep, or the run failed or broke an invariant
	bin         string
	config      string
	dbName      string
	dbURL       string // the run's database, as the workers get it
	adminURL    string
	pool        *pgxpool.Pool
	rdb         *redis.Client
	doubles     *exec.Cmd
	doublesIn   io.WriteCloser
	doublesDone chan struct{}
	sttURL      string
	crmURL      string

	mu        sync.Mutex
	workers   []*workerProc
	exitedOwn []string // workers that exited without being killed
	kills     int
	lifetimes []time.Duration

	cleanups []func()
}

// workerProc is one incarnation of a worker process.
type workerProc struct {
	slot, incarnation int
	cmd               *exec.Cmd
	log               string
	started           time.Time
	done              chan struct{}
	killed            bool
	err               error
}

func (c *chaos) atCleanup(f func()) { c.cleanups = append(c.cleanups, f) }

func (c *chaos) cleanup() {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
}

// run does the run and reports; broken says an invariant broke.
func (c *chaos) run(ctx context.Context) (broken bool, err error) {
	o := c.o
	c.start = time.Now()
	say("seed %d; %d recordings, %d workers, %d kills every %s–%s; vendor 429 share %.2f with %s–%s cooldowns; %d CPUs, load average %s",
		o.seed, o.recordings, o.workers, o.kills, o.killMin, o.killMax, o.rateLimitShare, o.cooldownMin, o.cooldownMax, numCPU(), loadAvg())
	if c.work, err = os.MkdirTemp("", "callscribe-chaos-"); err != nil {
		return false, err
	}
	c.atCleanup(func() {
		if c.keepWork {
			say("work directory kept (logs, configuration, recordings): %s", c.work)
			return
		}
		_ = os.RemoveAll(c.work)
	})
	if err := c.build(ctx); err != nil {
		return false, err
	}
	if err := c.createDatabase(ctx); err != nil {
		return false, err
	}
	if err := c.resetRedis(ctx); err != nil {
		return false, err
	}
	if err := c.startDoubles(ctx); err != nil {
		return false, err
	}
	manifest, err := c.writeRecordings()
	if err != nil {
		return false, err
	}
	if err := c.writeConfig(); err != nil {
		return false, err
	}
	if out, err := c.callscribe(ctx, "migrate", "up"); err != nil {
		return false, fmt.Errorf("migrate up: %w\n%s", err, out)
	}
	t0 := time.Now()
	out, err := c.callscribe(ctx, "ingest", "--manifest", manifest)
	if err != nil {
		return false, fmt.Errorf("ingest --manifest: %w\n%s", err, out)
	}
	say("ingested %d recordings in %s", o.recordings, time.Since(t0).Round(time.Millisecond))

	c.atCleanup(c.stopWorkers)
	for slot := range o.workers {
		if err := c.startWorker(slot); err != nil {
			return false, err
		}
	}
	if err := c.waitForWork(ctx, time.Now()); err != nil {
		return false, err
	}
	chaosStart := time.Now()
	if err := c.killLoop(ctx); err != nil {
		return false, err
	}
	atKillsEnd, _ := c.progress(ctx)
	say("%d kills in %s; %d/%d committed, %d delivered when they ended", c.kills, time.Since(chaosStart).Round(time.Millisecond),
		atKillsEnd.committed, o.recordings, atKillsEnd.delivered)
	settleErr := c.settle(ctx)
	c.stopWorkers()
	r, err := c.collect(ctx)
	if err != nil {
		return false, err
	}
	r.atKillsEnd = atKillsEnd
	r.settleErr = settleErr
	broken = c.report(ctx, r)
	if settleErr != nil && !broken {
		broken = true
	}
	return broken, nil
}

func numCPU() int { return runtime.NumCPU() }

// loadAvg is the 1-minute load average, or "?" off Linux.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// build builds callscribe into the work directory (not bin/, which other
// builds of the tree share), unless --bin names one.
func (c *chaos) build(ctx context.Context) error {
	if c.o.binary != "" {
		c.bin = c.o.binary
		return nil
	}
	c.bin = filepath.Join(c.work, "callscribe")
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", c.bin, "./cmd/callscribe")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/callscribe: %w", err)
	}
	say("built %s in %s", c.bin, time.Since(t0).Round(time.Millisecond))
	return nil
}

// createDatabase creates chaos_<pid> on the server and drops it at the end.
func (c *chaos) createDatabase(ctx context.Context) error {
	c.adminURL = c.o.databaseURL
	c.dbName = fmt.Sprintf("chaos_%d", os.Getpid())
	admin, err := pgx.Connect(ctx, c.adminURL)
	if err != nil {
		return fmt.Errorf("connecting to PostgreSQL at %s: %w", devservice.RedactURL(c.adminURL), err)
	}
	defer func() { _ = admin.Close(context.WithoutCancel(ctx)) }()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.dbName}.Sanitize()); err != nil {
		return fmt.Errorf("creating database %s: %w", c.dbName, err)
	}
	c.atCleanup(func() {
		if c.pool != nil {
			c.pool.Close()
		}
		if c.o.keep {
			say("database kept: %s", devservice.RedactURL(c.dbURL))
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a, err := pgx.Connect(dctx, c.adminURL)
		if err == nil {
			_, err = a.Exec(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{c.dbName}.Sanitize()+" WITH (FORCE)")
			_ = a.Close(dctx)
		}
		if err != nil {
			say("dropping database %s: %v", c.dbName, err)
			return
		}
		say("dropped database %s", c.dbName)
	})
	u, err := url.Parse(c.adminURL)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("--database-url must be a postgres:// URL: %s", devservice.RedactURL(c.adminURL))
	}
	u.Path = "/" + c.dbName
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(c.o.poolConns))
	u.RawQuery = q.Encode()
	c.dbURL = u.String()
	q.Del("pool_max_conns")
	q.Set("pool_max_conns", "2")
	u.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return fmt.Errorf("the run's database URL %s: %w", devservice.RedactURL(u.String()), err)
	}
	pgsession.ApplyPool(cfg, "callscribe chaos")
	if c.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return err
	}
	say("database %s created on %s", c.dbName, devservice.RedactURL(c.adminURL))
	return nil
}

// resetRedis empties the run's Redis database (never index 0, where other
// programs of the machine keep their keys).
func (c *chaos) resetRedis(ctx context.Context) error {
	opt, err := redis.ParseURL(c.o.redisURL)
	if err != nil {
		return fmt.Errorf("--redis-url: %w", err)
	}
	if opt.DB == 0 {
		return fmt.Errorf("--redis-url %s: database index 0 is refused (the run empties its database); name a dedicated one, e.g. /9", devservice.RedactURL(c.o.redisURL))
	}
	c.rdb = redis.NewClient(opt)
	if err := c.rdb.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("emptying Redis %s: %w", devservice.RedactURL(c.o.redisURL), err)
	}
	c.atCleanup(func() {
		if !c.o.keep {
			_ = c.rdb.FlushDB(context.Background()).Err()
		}
		_ = c.rdb.Close()
	})
	say("Redis database %s emptied", devservice.RedactURL(c.o.redisURL))
	return nil
}

// The doubles' credentials (loopback only).
const (
	keyA     = "chaos-key-a"
	keyB     = "chaos-key-b"
	crmToken = "chaos-crm-token"
)

// startDoubles starts doubles.py and reads the two base URLs it prints.
func (c *chaos) startDoubles(ctx context.Context) error {
	if _, err := os.Stat(c.o.doubles); err != nil {
		return fmt.Errorf("the doubles' program: %w (run from the repository's root)", err)
	}
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	cmd := exec.Command(c.o.python, c.o.doubles, //nolint:gosec // the developer names the interpreter and the program
		"--stt-keys", keyA+","+keyB, "--crm-token", crmToken,
		"--rate-limit-share", strconv.FormatFloat(c.o.rateLimitShare, 'f', -1, 64),
		"--cooldown-min", secs(c.o.cooldownMin), "--cooldown-max", secs(c.o.cooldownMax),
		"--crm-429-share", strconv.FormatFloat(c.o.crm429Share, 'f', -1, 64),
		"--crm-503-share", strconv.FormatFloat(c.o.crm503, 'f', -1, 64),
		"--seed", strconv.FormatUint(c.o.seed%(1<<31), 10), "--log-dir", c.work)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(c.work, "doubles.log"))
	if err != nil {
		return err
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting the doubles (%s %s): %w", c.o.python, c.o.doubles, err)
	}
	c.doubles, c.doublesIn, c.doublesDone = cmd, stdin, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(c.doublesDone)
	}()
	c.atCleanup(func() {
		_ = c.doublesIn.Close() // the doubles exit when their stdin closes
		_ = c.doubles.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.doublesDone:
		case <-time.After(5 * time.Second):
			_ = c.doubles.Process.Kill()
			<-c.doublesDone
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line, ok := <-lines:
		var urls struct{ STT, CRM string }
		if !ok || json.Unmarshal([]byte(line), &urls) != nil || urls.STT == "" || urls.CRM == "" {
			return fmt.Errorf("the doubles did not say where they listen (see %s)", filepath.Join(c.work, "doubles.log"))
		}
		c.sttURL, c.crmURL = urls.STT, urls.CRM
	case <-time.After(30 * time.Second):
		return errors.New("the doubles did not start within 30s")
	case <-ctx.Done():
		return ctx.Err()
	}
	say("doubles: stt-http/v1 vendor at %s, crm-webhook/v1 CRM at %s", c.sttURL, c.crmURL)
	return nil
}

// tenants of the run: northline and harbor share an API key and its account
// label (one scope), ridgeway has its own.
var tenants = []struct{ id, key, account string }{{"northline", keyA, "chaos-a"}, {"harbor", keyA, "chaos-a"}, {"ridgeway", keyB, "chaos-b"}}

// writeRecordings writes the WAVs and the manifest.
func (c *chaos) writeRecordings() (string, error) {
	root := filepath.Join(c.work, "audio")
	var b strings.Builder
	started := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
	for i := range c.o.recordings {
		t := tenants[i%len(tenants)].id
		call := fmt.Sprintf("chaos-%04d", i+1)
		rel := t + "/" + call + ".wav"
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		d := time.Second + time.Duration(c.rng.Int64N(int64(3*time.Second)))
		if err := os.WriteFile(path, wav(d, c.rng.Uint64()), 0o600); err != nil {
			return "", err
		}
		lane := "immediate"
		if i%3 == 2 {
			lane = "batch"
		}
		line, _ := json.Marshal(map[string]string{"tenant_id": t, "call_id": call, "audio": rel, "lane": lane, "language": "en", "started_at": started})
		b.Write(line)
		b.WriteByte('\n')
	}
	manifest := filepath.Join(c.work, "manifest.jsonl")
	return manifest, os.WriteFile(manifest, []byte(b.String()), 0o600)
}

// wav is an 8 kHz mono 16-bit WAV of length d, its samples drawn from seed
// (so that every file has its own digest).
func wav(d time.Duration, seed uint64) []byte {
	const rate = 8000
	n := int(d.Seconds() * rate)
	r := rand.New(rand.NewPCG(seed, seed>>7))
	b := make([]byte, 0, 44+2*n)
	b = append(b, "RIFF"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(36+2*n))
	b = append(b, "WAVEfmt "...)
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1) // PCM
	b = binary.LittleEndian.AppendUint16(b, 1) // mono
	b = binary.LittleEndian.AppendUint32(b, rate)
	b = binary.LittleEndian.AppendUint32(b, rate*2)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(2*n))
	for range n {
		b = binary.LittleEndian.AppendUint16(b, uint16(r.IntN(4000)))
	}
	return b
}

// writeConfig writes callscribe.yaml: the tenants on generic-http at the
// vendor double with a webhook CRM at the CRM double, timings short enough
// that work a killed worker held is taken over within the run (River
// rescues a job left running for rescue_after; a probe is taken over after
// probe_timeout).
func (c *chaos) writeConfig() error {
	var b strings.Builder
	fmt.Fprintf(&b, "database_url: %q\nredis_url: %q\n", c.dbURL, c.o.redisURL)
	fmt.Fprintf(&b, "log: {level: %s, format: text}\n", c.o.logLevel)
	fmt.Fprintf(&b, "audio: {root: %q}\n", filepath.Join(c.work, "audio"))
	b.WriteString("retry_after: {base_backoff: 200ms, max_backoff: 5s}\n")
	b.WriteString("capacity:\n  window: {start_target: 8}\n")
	b.WriteString("pipeline:\n  rollout_default: enforce\n  poll_interval: 200ms\n  probe_timeout: 10s\n  probe_wait: 100ms\n" +
		"  step_timeout: 15s\n  rescue_after: 20s\n  sweep_interval: 10s\n  shutdown_grace: 5s\n  tenants:\n")
	for _, t := range tenants {
		fmt.Fprintf(&b, "    %s: {provider: generic-http, base_url: %q, api_key: %s, account: %s,\n      crm: {kind: webhook, base_url: %q, token: %s}}\n",
			t.id, c.sttURL, t.key, t.account, c.crmURL, crmToken)
	}
	c.config = filepath.Join(c.work, "callscribe.yaml")
	return os.WriteFile(c.config, []byte(b.String()), 0o600)
}

// callscribe runs one command of the binary and returns its output.
func (c *chaos) callscribe(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"--config", c.config}, args...)...) //nolint:gosec // our own binary
	cmd.Dir = c.work
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return string(out) + string(exitErr.Stderr), err
	}
	return string(out), err
}

// startWorker starts a new incarnation of the worker in slot.
func (c *chaos) startWorker(slot int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.workers) <= slot {
		c.workers = append(c.workers, nil)
	}
	n := 1
	if prev := c.workers[slot]; prev != nil {
		n = prev.incarnation + 1
	}
	w := &workerProc{slot: slot, incarnation: n, log: filepath.Join(c.work, fmt.Sprintf("worker-%d-%03d.log", slot+1, n)), done: make(chan struct{})}
	f, err := os.Create(w.log)
	if err != nil {
		return err
	}
	w.cmd = exec.Command(c.bin, "--config", c.config, "worker") //nolint:gosec // our own binary
	w.cmd.Dir = c.work
	w.cmd.Stdout, w.cmd.Stderr = f, f
	if err := w.cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("starting worker %d: %w", slot+1, err)
	}
	w.started = time.Now()
	c.workers[slot] = w
	go func() {
		w.err = w.cmd.Wait()
		_ = f.Close()
		c.mu.Lock()
		if !w.killed {
			c.exitedOwn = append(c.exitedOwn, fmt.Sprintf("worker %d (incarnation %d, pid %d) exited on its own after %s: %v; log %s",
				slot+1, n, w.cmd.Process.Pid, time.Since(w.started).Round(time.Millisecond), w.err, w.log))
		}
		c.mu.Unlock()
		close(w.done)
	}()
	return nil
}

// kill SIGKILLs the worker in slot and waits for it to be gone.
func (c *chaos) kill(slot int) {
	c.mu.Lock()
	w := c.workers[slot]
	alive := true
	select {
	case <-w.done:
		alive = false // it exited on its own (reported); restarted all the same
	default:
		w.killed = true
	}
	c.mu.Unlock()
	if !alive {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.done
	c.mu.Lock()
	c.kills++
	c.lifetimes = append(c.lifetimes, time.Since(w.started))
	c.mu.Unlock()
}

// stopWorkers stops every worker: SIGTERM, then SIGKILL after 15s.
func (c *chaos) stopWorkers() {
	c.mu.Lock()
	ws := slices.Clone(c.workers)
	for _, w := range ws {
		if w != nil {
			w.killed = true // stopping is ours
		}
	}
	c.mu.Unlock()
	for _, w := range ws {
		if w != nil {
			_ = w.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, w := range ws {
		if w == nil {
			continue
		}
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	}
}

// waitForWork waits until the workers have begun submitting, so that the
// kills hit work in progress.
func (c *chaos) waitForWork(ctx context.Context, since time.Time) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := c.progress(ctx)
		if err == nil && p.started > 0 {
			say("workers submitting %s after their start; the kills begin", time.Since(since).Round(time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no recording left eligible within 2 minutes of the workers' start (progress %+v, %w); see the worker logs in %s", p, err, c.work)
		}
		if !clock.Sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// killLoop SIGKILLs a random worker every killMin..killMax, restarting it
// at once, kills times.
func (c *chaos) killLoop(ctx context.Context) error {
	for k := range c.o.kills {
		pause := c.o.killMin + time.Duration(c.rng.Int64N(int64(c.o.killMax-c.o.killMin)+1))
		if !clock.Sleep(ctx, pause) {
			return ctx.Err()
		}
		slot := c.rng.IntN(c.o.workers)
		c.kill(slot)
		if err := c.startWorker(slot); err != nil {
			return err
		}
		if (k+1)%10 == 0 {
			p, _ := c.progress(ctx)
			say("%d/%d kills; committed %d/%d, delivered %d", k+1, c.o.kills, p.committed, c.o.recordings, p.delivered)
		}
	}
	return nil
}

// progress is what the database says.
type progress struct {
	started, committed, terminalBad, delivered, dead, outbox int
}

func (c *chaos) progress(ctx context.Context) (progress, error) {
	var p progress
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.pool.QueryRow(qctx, `SELECT
		count(*) FILTER (WHERE state NOT IN ('received', 'eligible')),
		count(*) FILTER (WHERE state = 'committed'),
		count(*) FILTER (WHERE state IN ('failed', 'expired')),
		(SELECT count(*) FROM outbox WHERE state = 'delivered'),
		(SELECT count(*) FROM outbox WHERE state = 'dead'),
		(SELECT count(*) FROM outbox)
		FROM recordings`).Scan(&p.started, &p.committed, &p.terminalBad, &p.delivered, &p.dead, &p.outbox)
	return p, err
}

// settle waits for every recording committed and every set delivered, the
// workers still running (one that exits on its own is restarted and
// reported).
func (c *chaos) settle(ctx context.Context) error {
	t0 := time.Now()
	deadline := t0.Add(c.o.settleTimeout)
	lastSay := t0
	for {
		p, err := c.progress(ctx)
		if err == nil {
			if p.committed == c.o.recordings && p.delivered == c.o.recordings && p.outbox == c.o.recordings {
				say("settled: %d committed, %d delivered, %s after the last kill", p.committed, p.delivered, time.Since(t0).Round(time.Millisecond))
				return nil
			}
			if p.terminalBad > 0 || p.dead > 0 {
				return fmt.Errorf("%d recordings failed or expired and %d deliveries dead: they will never be committed and delivered", p.terminalBad, p.dead)
			}
		}
		if time.Now().After(deadline) {
			why := fmt.Errorf("not settled within --settle-timeout %s: %d/%d committed, %d/%d delivered (%d outbox rows, %d failed or expired, %d dead)",
				c.o.settleTimeout, p.committed, c.o.recordings, p.delivered, c.o.recordings, p.outbox, p.terminalBad, p.dead)
			if err != nil {
				why = fmt.Errorf("%w; the last progress read failed: %w", why, err)
			}
			return why
		}
		if time.Since(lastSay) >= 5*time.Second {
			say("settling: committed %d/%d, delivered %d, %s", p.committed, c.o.recordings, p.delivered, time.Since(t0).Round(100*time.Millisecond))
			lastSay = time.Now()
		}
		c.mu.Lock()
		var gone []int
		for _, w := range c.workers {
			select {
			case <-w.done:
				gone = append(gone, w.slot)
			default:
			}
		}
		c.mu.Unlock()
		for _, slot := range gone {
			if err := c.startWorker(slot); err != nil {
				return err
			}
		}
		if !clock.Sleep(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// What the run found.
type recordingJSON struct {
	ID          string `json:"id"`
	TenantID    string `json:"tenant_id"`
	CallID      string `json:"call_id"`
	BusinessKey string `json:"business_key"`
	State       string `json:"state"`
	Attempt     int    `json:"attempt"`
}

type outboxListing struct {
	Rows []struct {
		IdempotencyKey string `json:"idempotency_key"`
		State          string `json:"state"`
		Attempts       int    `json:"attempts"`
		TenantID       string `json:"tenant_id"`
		CallID         string `json:"call_id"`
	} `json:"rows"`
	Counters map[string]int64 `json:"counters"`
}

type submissionCheck struct {
	RecordingID        string    `json:"recording_id"`
	TenantID           string    `json:"tenant_id"`
	CallID             string    `json:"call_id"`
	Scope              string    `json:"scope"`
	AdmittedSeq        int64     `json:"admitted_seq"`
	AdmittedAt         time.Time `json:"admitted_at"`
	SentAt             time.Time `json:"sent_at"`
	IgnoredSeq         int64     `json:"ignored_seq"`
	IgnoredNotBefore   time.Time `json:"ignored_not_before"`
	InFlightSeq        int64     `json:"in_flight_seq"`
	InFlightRecordedAt time.Time `json:"in_flight_recorded_at"`
}

type audit struct {
	Accounting struct {
		Submissions          int               `json:"submissions"`
		IgnoredKnownCooldown int               `json:"ignored_known_cooldown"`
		InFlight             int               `json:"in_flight"`
		Throttled            int               `json:"throttled"`
		ThrottledIgnored     int               `json:"throttled_ignored"`
		Sent                 int               `json:"sent"`
		GapP50               time.Duration     `json:"gap_p50"`
		GapP99               time.Duration     `json:"gap_p99"`
		GapMax               time.Duration     `json:"gap_max"`
		InFlightGapMax       time.Duration     `json:"in_flight_gap_max"`
		Ignored              []submissionCheck `json:"ignored"`
		InFlightList         []submissionCheck `json:"in_flight_list"`
	} `json:"accounting"`
}

type lateArrival struct {
	Key                        string  `json:"key"`
	Scope                      string  `json:"scope"`
	Cooldown                   int     `json:"cooldown"`
	Arrival                    string  `json:"arrival"`
	SinceAnnouncingMS          float64 `json:"since_announcing_429_ms"`
	BeforeEndMS                float64 `json:"before_cooldown_end_ms"`
	AdmittedAt                 string  `json:"admitted_at"`
	AdmittedBeforeAnnouncement bool    `json:"admitted_before_announcement"`
}

type sttStats struct {
	Submissions         int            `json:"submissions"`
	Completed           int            `json:"completed"`
	ThrottledAnnouncing int            `json:"throttled_announcing"`
	ByForm              map[string]int `json:"throttled_announcing_by_form"`
	ThrottledInCooldown int            `json:"throttled_in_cooldown"`
	Replays             int            `json:"replays"`
	ReplaysPending      int            `json:"replays_pending"`
	KeyReused           int            `json:"key_reused"`
	Invalid             int            `json:"invalid"`
	Unauthorized        int            `json:"unauthorized"`
	Polls               int            `json:"polls"`
	ReconcilesFound     int            `json:"reconciles_found"`
	ReconcilesNotFound  int            `json:"reconciles_not_found"`
	BatchesRefused      int            `json:"batches_refused"`
	Transcriptions      map[string]int `json:"transcriptions"`
	InsideAnnounced     []lateArrival  `json:"inside_announced"`
	InsideUnannounced   int            `json:"inside_unannounced"`
}

type crmStats struct {
	Deliveries   int            `json:"deliveries"`
	Applied      int            `json:"applied"`
	Replays      int            `json:"replays"`
	Conflicts    int            `json:"conflicts"`
	Throttled    int            `json:"throttled"`
	Unavailable  int            `json:"unavailable"`
	Invalid      int            `json:"invalid"`
	Unauthorized int            `json:"unauthorized"`
	Applications map[string]int `json:"applications"`
}

type results struct {
	recordings []recordingJSON
	outbox     outboxListing
	audit      audit
	stt        sttStats
	crm        crmStats
	setsPerRec map[string]int // recording id -> action sets, of those with too many or (committed) too few
	commits    map[string]int // recording id -> commit events, of the same
	atKillsEnd progress
	settleErr  error
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// collect reads the ledger (through the CLI, as an operator would), the
// database and the doubles' counters.
func (c *chaos) collect(ctx context.Context) (*results, error) {
	r := &results{setsPerRec: map[string]int{}, commits: map[string]int{}}
	out, err := c.callscribe(ctx, "jobs", "list", "--json")
	if err != nil {
		return nil, fmt.Errorf("jobs list --json: %w\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &r.recordings); err != nil {
		return nil, fmt.Errorf("jobs list --json: %w", err)
	}
	if out, err = c.callscribe(ctx, "outbox", "list", "--json"); err != nil {
		return nil, fmt.Errorf("outbox list --json: %w\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &r.outbox); err != nil {
		return nil, fmt.Errorf("outbox list --json: %w", err)
	}
	if out, err = c.callscribe(ctx, "scopes", "audit", "--since", "1h", "--json"); err != nil {
		return nil, fmt.Errorf("scopes audit --json: %w\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &r.audit); err != nil {
		return nil, fmt.Errorf("scopes audit --json: %w", err)
	}
	// Action sets and commit events: one each for a committed recording,
	// never more than one for any.
	rows, err := c.pool.Query(ctx, `SELECT id, sets, commits FROM (SELECT r.id::text AS id, r.state,
		(SELECT count(*) FROM action_sets a WHERE a.recording_id = r.id) AS sets,
		(SELECT count(*) FROM recording_events e WHERE e.recording_id = r.id AND e.new_state = 'committed') AS commits
		FROM recordings r) x
		WHERE sets > 1 OR commits > 1 OR (state = 'committed' AND (sets <> 1 OR commits <> 1))`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		var sets, commits int
		if err := rows.Scan(&id, &sets, &commits); err != nil {
			return nil, err
		}
		r.setsPerRec[id], r.commits[id] = sets, commits
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := getJSON(ctx, c.sttURL+"/stats", &r.stt); err != nil {
		return nil, fmt.Errorf("the vendor double's stats: %w", err)
	}
	if err := getJSON(ctx, c.crmURL+"/stats", &r.crm); err != nil {
		return nil, fmt.Errorf("the CRM double's stats: %w", err)
	}
	return r, nil
}

// report prints the report and says whether an invariant broke.
func (c *chaos) report(ctx context.Context, r *results) (broken bool) {
	o := c.o
	w := os.Stdout
	var problems []string
	var evidence []recordingJSON // recordings to show
	byKey := map[string]recordingJSON{}
	byID := map[string]recordingJSON{}
	for _, rec := range r.recordings {
		byKey[rec.BusinessKey] = rec
		byID[rec.ID] = rec
	}
	addEvidence := func(rec recordingJSON) {
		if !slices.ContainsFunc(evidence, func(e recordingJSON) bool { return e.ID == rec.ID }) {
			evidence = append(evidence, rec)
		}
	}

	// Recordings.
	states := map[string]int{}
	attempts := 0
	for _, rec := range r.recordings {
		states[rec.State]++
		attempts += rec.Attempt
		if rec.State != "committed" && len(evidence) < 5 {
			addEvidence(rec)
		}
	}
	if len(r.recordings) != o.recordings || states["committed"] != o.recordings {
		problems = append(problems, fmt.Sprintf("%d of %d recordings committed (%d in the ledger)", states["committed"], o.recordings, len(r.recordings)))
	}
	if len(r.setsPerRec) > 0 {
		var ids []string
		for id := range r.setsPerRec {
			ids = append(ids, fmt.Sprintf("%s (%d sets, %d commit events)", id, r.setsPerRec[id], r.commits[id]))
			addEvidence(byID[id])
		}
		problems = append(problems, fmt.Sprintf("%d recordings with more than one action set or commit event, or committed without one: %v", len(ids), first(ids, 10)))
	}

	// Deliveries.
	delivered, outboxKeys := 0, map[string]bool{}
	tries := 0
	for _, row := range r.outbox.Rows {
		outboxKeys[row.IdempotencyKey] = true
		tries += row.Attempts
		if row.State == "delivered" {
			delivered++
		}
	}
	if len(r.outbox.Rows) != o.recordings || delivered != o.recordings {
		problems = append(problems, fmt.Sprintf("%d of %d action sets delivered (%d outbox rows)", delivered, o.recordings, len(r.outbox.Rows)))
	}

	// The vendor double: each key transcribed exactly once.
	var twice, never, unknown []string
	for key, n := range r.stt.Transcriptions {
		if _, ok := byKey[key]; !ok {
			unknown = append(unknown, key)
		}
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s ×%d", key, n))
			addEvidence(byKey[key])
		}
	}
	for key := range byKey {
		if r.stt.Transcriptions[key] == 0 {
			never = append(never, key)
		}
	}
	sort.Strings(twice)
	if len(twice) > 0 || len(never) > 0 || len(unknown) > 0 {
		problems = append(problems, fmt.Sprintf("vendor transcriptions: %d keys more than once %v, %d never %v, %d not in the ledger %v",
			len(twice), twice, len(never), first(never, 5), len(unknown), first(unknown, 5)))
	}

	// The CRM double: each set applied exactly once.
	var applyTwice, applyNever, applyUnknown []string
	for key, n := range r.crm.Applications {
		if !outboxKeys[key] {
			applyUnknown = append(applyUnknown, key)
		}
		if n > 1 {
			applyTwice = append(applyTwice, fmt.Sprintf("%s ×%d", key, n))
		}
	}
	for key := range outboxKeys {
		if r.crm.Applications[key] == 0 {
			applyNever = append(applyNever, key)
		}
	}
	sort.Strings(applyTwice)
	if len(applyTwice) > 0 || len(applyNever) > 0 || len(applyUnknown) > 0 || r.crm.Conflicts > 0 {
		problems = append(problems, fmt.Sprintf("CRM applications: %d keys more than once %v, %d never %v, %d not in the outbox %v, %d conflicting bodies",
			len(applyTwice), applyTwice, len(applyNever), first(applyNever, 5), len(applyUnknown), first(applyUnknown, 5), r.crm.Conflicts))
	}

	// The exact rule.
	acc := r.audit.Accounting
	if acc.IgnoredKnownCooldown != 0 {
		problems = append(problems, fmt.Sprintf("%d submissions ignored a known cooldown (scopes audit, exact rule)", acc.IgnoredKnownCooldown))
		for _, chk := range acc.Ignored {
			addEvidence(recordingJSON{ID: chk.RecordingID, TenantID: chk.TenantID, CallID: chk.CallID})
		}
	}
	c.mu.Lock()
	exitedOwn := slices.Clone(c.exitedOwn)
	kills, lifetimes := c.kills, slices.Clone(c.lifetimes)
	c.mu.Unlock()
	if len(exitedOwn) > 0 {
		problems = append(problems, fmt.Sprintf("%d worker exits not caused by the run: %s", len(exitedOwn), strings.Join(exitedOwn, "; ")))
	}
	if r.settleErr != nil {
		problems = append(problems, r.settleErr.Error())
	}

	late := r.stt.InsideAnnounced
	lateBefore, lateAfter := 0, 0
	var since []float64
	for _, a := range late {
		if a.AdmittedBeforeAnnouncement {
			lateBefore++
		} else {
			lateAfter++
		}
		since = append(since, a.SinceAnnouncingMS)
	}
	sort.Float64s(since)
	sort.Slice(lifetimes, func(i, j int) bool { return lifetimes[i] < lifetimes[j] })

	fmt.Fprintf(w, "\ncallscribe chaos report (%s wall; seed %d; %d CPUs, load average %s at the end)\n",
		time.Since(c.start).Round(time.Millisecond), o.seed, numCPU(), loadAvg())
	fmt.Fprintf(w, "  recordings by state:            %s (of %d ingested; %d committed when the kills ended)\n", stateList(states), o.recordings, r.atKillsEnd.committed)
	fmt.Fprintf(w, "  worker kills:                   %d SIGKILLs across %d workers, every %s–%s, each restarted at once; a worker lived %s at the median; %d exits not caused by the run\n",
		kills, o.workers, o.killMin, o.killMax, median(lifetimes).Round(time.Millisecond), len(exitedOwn))
	fmt.Fprintf(w, "  vendor double (stt-http/v1):    %d submissions, %d × 429 announcing a cooldown (%d delay-seconds, %d IMF-fixdate), %d × 429 inside one, %d replays of a transcribed key, %d reconciles (%d found, %d × 404), %d polls\n",
		r.stt.Submissions, r.stt.ThrottledAnnouncing, r.stt.ByForm["delay-seconds"], r.stt.ByForm["imf-fixdate"], r.stt.ThrottledInCooldown,
		r.stt.Replays, r.stt.ReconcilesFound+r.stt.ReconcilesNotFound, r.stt.ReconcilesFound, r.stt.ReconcilesNotFound, r.stt.Polls)
	fmt.Fprintf(w, "  keys transcribed by the vendor: %d of %d; more than once: %d (must be 0); never: %d\n",
		len(r.stt.Transcriptions), len(byKey), len(twice), len(never))
	fmt.Fprintf(w, "  submissions per recording:      %.2f on average (the ledger's count)\n", float64(attempts)/float64(max(len(r.recordings), 1)))
	fmt.Fprintf(w, "  CRM double (crm-webhook/v1):    %d deliveries (%d tries in the outbox), %d applied, %d replays answered 200, %d × 429, %d × 503, %d conflicting bodies\n",
		r.crm.Deliveries, tries, r.crm.Applied, r.crm.Replays, r.crm.Throttled, r.crm.Unavailable, r.crm.Conflicts)
	fmt.Fprintf(w, "  action sets applied more than once in the CRM: %d (must be 0); delivered rows %d of %d\n", len(applyTwice), delivered, o.recordings)
	fmt.Fprintf(w, "  scopes audit --since 1h (the exact rule):\n")
	fmt.Fprintf(w, "    submissions judged:           %d (%d answered 429)\n", acc.Submissions, acc.Throttled)
	fmt.Fprintf(w, "    accounting.ignored_known_cooldown: %d (must be 0)\n", acc.IgnoredKnownCooldown)
	fmt.Fprintf(w, "    in_flight:                    %d (allowed: sent while a later cooldown was being announced; longest gap among them %s)\n", acc.InFlight, acc.InFlightGapMax)
	fmt.Fprintf(w, "    admission → send gap:         gap_p50 %s, gap_p99 %s, gap_max %s (over %d sent)\n", acc.GapP50, acc.GapP99, acc.GapMax, acc.Sent)
	fmt.Fprintf(w, "  vendor's own late arrivals:     %d submissions arrived inside a cooldown the double had already announced: in-flight late arrivals, counted apart (allowed)",
		len(late))
	if len(late) > 0 {
		fmt.Fprintf(w, "; %s after the announcing 429 was written (median %s, max %s); their X-Admitted-At before it: %d, after it: %d (whether the platform knew of the cooldown at their admission is the exact rule's call, above)",
			msList(since, 8), msString(medianF(since)), msString(since[len(since)-1]), lateBefore, lateAfter)
	}
	fmt.Fprintln(w)
	if r.stt.InsideUnannounced > 0 {
		fmt.Fprintf(w, "  arrivals inside a cooldown decided but not yet written: %d (no client could know of it)\n", r.stt.InsideUnannounced)
	}
	logs := "removed at the end (--keep keeps them)"
	if o.keep || len(problems) > 0 {
		logs = "kept in " + c.work
	}
	fmt.Fprintf(w, "  logs:                           stt-arrivals.jsonl, crm-deliveries.jsonl, worker-*.log, %s\n", logs)
	if len(problems) == 0 {
		fmt.Fprintf(w, "  invariants:                     all held\n")
		return false
	}
	fmt.Fprintf(w, "  invariants:                     BROKEN\n")
	for _, p := range problems {
		fmt.Fprintf(w, "    - %s\n", p)
	}
	for _, chk := range acc.Ignored {
		fmt.Fprintf(w, "    ignored a known cooldown: recording %s (%s/%s) scope %s admitted at %s with seq %d; offer %d deferred it until %s; sent at %s\n",
			chk.RecordingID, chk.TenantID, chk.CallID, chk.Scope, chk.AdmittedAt.Format(time.RFC3339Nano), chk.AdmittedSeq,
			chk.IgnoredSeq, chk.IgnoredNotBefore.Format(time.RFC3339Nano), chk.SentAt.Format(time.RFC3339Nano))
	}
	for i, rec := range evidence {
		if i == 10 {
			fmt.Fprintf(w, "    (%d more recordings not shown)\n", len(evidence)-i)
			break
		}
		out, err := c.callscribe(ctx, "jobs", "show", "--tenant", rec.TenantID, "--call", rec.CallID)
		fmt.Fprintf(w, "\n  callscribe jobs show --tenant %s --call %s   (recording %s)\n", rec.TenantID, rec.CallID, rec.ID)
		if err != nil {
			fmt.Fprintf(w, "    (failed: %v)\n", err)
		}
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	return true
}

func first(s []string, n int) []string {
	sort.Strings(s)
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}

func stateList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[len(d)/2]
}

func medianF(f []float64) float64 {
	if len(f) == 0 {
		return 0
	}
	return f[len(f)/2]
}

func msString(ms float64) string {
	return (time.Duration(ms * float64(time.Millisecond))).Round(100 * time.Microsecond).String()
}

// msList prints up to n of the sorted values, in milliseconds.
func msList(ms []float64, n int) string {
	parts := make([]string, 0, min(len(ms), n))
	for i, v := range ms {
		if i == n {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, msString(v))
	}
	return strings.Join(parts, ", ")
}
