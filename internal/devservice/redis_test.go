//go:build unix

package devservice

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// exerciseRedis runs the commands the project relies on against url.
func exerciseRedis(t *testing.T, url string) {
	t.Helper()
	ctx := t.Context()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redis.ParseURL(%q): %v", url, err)
	}
	client := redis.NewClient(opts)
	defer client.Close()

	if got, err := client.Ping(ctx).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v", got, err)
	}
	if err := client.Set(ctx, "greeting", "bonjour", time.Minute).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := client.Get(ctx, "greeting").Result(); err != nil || got != "bonjour" {
		t.Errorf("GET = %q, %v; want bonjour", got, err)
	}
	script := redis.NewScript(`return redis.call("INCRBY", KEYS[1], ARGV[1]) * 2`)
	if got, err := script.Run(ctx, client, []string{"counter"}, 21).Int(); err != nil || got != 42 {
		t.Errorf("EVAL = %d, %v; want 42", got, err)
	}
	now, err := client.Time(ctx).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	if d := time.Since(now); d < -time.Minute || d > time.Minute {
		t.Errorf("TIME = %s, more than a minute from ours", now)
	}
}

func TestStartRedisServer(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r, err := StartRedisServer(t.Context(), RedisConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("StartRedisServer: %v", err)
	}
	t.Logf("StartRedisServer took %s; URL %s; hint %s", time.Since(start), r.URL(), r.ConnectHint())
	t.Cleanup(func() { _ = r.Stop() })

	dir, pid := r.Dir(), r.proc.pid()
	requireDirExists(t, dir)
	requireProcessRunning(t, pid)
	if want := "unix://" + filepath.Join(dir, "redis.sock"); r.URL() != want {
		t.Errorf("URL() = %q, want %q", r.URL(), want)
	}
	fi, err := os.Stat(filepath.Join(dir, "redis.sock"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket: %v, %v; want mode 0700", fi, err)
	}

	exerciseRedis(t, r.URL())

	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	requireDirGone(t, dir)
	requireProcessGone(t, pid)
	if err := r.Stop(); err != nil {
		t.Errorf("second Stop: %v, want nil", err)
	}
}

func TestStartRedisServer_ExitsEarly(t *testing.T) {
	t.Parallel()
	fake := filepath.Join(t.TempDir(), "redis-server")
	writeScript(t, fake, `echo "# Bad directive or wrong number of arguments (fake)"; exit 1`)
	_, err := StartRedisServer(t.Context(), RedisConfig{ServerPath: fake})
	if err == nil {
		t.Fatal("StartRedisServer succeeded with a server that exits at once")
	}
	for _, want := range []string{"redis-server exited", "Bad directive"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestStartMiniredis(t *testing.T) {
	t.Parallel()
	r, err := StartMiniredis()
	if err != nil {
		t.Fatalf("StartMiniredis: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	if !strings.HasPrefix(r.URL(), "redis://127.0.0.1:") || !strings.HasSuffix(r.URL(), "/0") {
		t.Errorf("URL() = %q, want redis://127.0.0.1:PORT/0", r.URL())
	}
	if r.Dir() != "" {
		t.Errorf("Dir() = %q, want empty for miniredis", r.Dir())
	}

	exerciseRedis(t, r.URL())

	// A connection open across Stop must be closed by the server. (Dialing
	// the port after Stop would prove nothing: on a busy machine another
	// test's server may have taken the freed port already.)
	addr := strings.TrimSuffix(strings.TrimPrefix(r.URL(), "redis://"), "/0")
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dialing miniredis at %s: %v", addr, err)
	}
	defer conn.Close()
	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading from a connection across Stop = %d, %v; want EOF: the server should have closed it", n, err)
	}
	if err := r.Stop(); err != nil {
		t.Errorf("second Stop: %v, want nil", err)
	}
}

func TestFindRedisServer(t *testing.T) {
	t.Parallel()
	path, err := FindRedisServer()
	if err != nil {
		t.Fatalf("FindRedisServer on this machine: %v", err)
	}
	if !isExecutable(path) {
		t.Errorf("FindRedisServer() = %s, not executable", path)
	}

	root := fakeTree(t, "b/redis-server")
	got, err := findRedisServer(filepath.Join(root, "a")+string(os.PathListSeparator)+filepath.Join(root, "b"), nil)
	if err != nil || got != filepath.Join(root, "b/redis-server") {
		t.Errorf("findRedisServer = %q, %v; want b/redis-server", got, err)
	}
	_, err = findRedisServer(filepath.Join(root, "a"), []string{filepath.Join(root, "c")})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), filepath.Join(root, "a")) || !strings.Contains(err.Error(), filepath.Join(root, "c")) {
		t.Errorf("findRedisServer with nothing there: %v, want ErrNotFound listing both places", err)
	}
}
