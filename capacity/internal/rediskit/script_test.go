package rediskit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/capacity/internal/rediskit"
	"github.com/callscribe/callscribe/internal/testredis"
)

// The shared prelude gives a script Redis's clock in ms and µs, or the
// test override in ARGV[1], and leaves ARGV[2] on to the script.
func TestNowScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testredis.Client(t)
	script := rediskit.NowScript(`return {now, now_us, ARGV[2]}`)

	got, err := script.Run(ctx, rdb, nil, "1234", "own").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != int64(1234) || got[1] != int64(1234000) || got[2] != "own" {
		t.Fatalf("with override 1234: %v, want [1234 1234000 own]", got)
	}

	server, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	vals, err := script.Run(ctx, rdb, nil, "", "own").Slice()
	if err != nil {
		t.Fatal(err)
	}
	now, nowUs := vals[0].(int64), vals[1].(int64)
	if now != nowUs/1000 {
		t.Fatalf("now %d ms and now_us %d µs disagree", now, nowUs)
	}
	if d := now - server.UnixMilli(); d < 0 || d > 5000 {
		t.Fatalf("now %d ms is %d ms from Redis TIME %d ms read just before", now, d, server.UnixMilli())
	}
}

// Only the shared prelude reads Redis TIME: no script of capacity or of the
// packages built on it computes "now" itself.
func TestOnlyThePreludeReadsTime(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "../..", "../../live", "../../httpapi"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || f == "script.go" {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(src), "'TIME'") || strings.Contains(string(src), `"TIME"`) {
				t.Errorf("%s reads Redis TIME itself; use rediskit.NowScript", f)
			}
		}
	}
}
