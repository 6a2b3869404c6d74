package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/internal/testredis"
)

var capSeq atomic.Int64

func TestCapacityStatusAndSetLimit(t *testing.T) {
	t.Parallel()
	redisURL := testredis.URL()
	provider := fmt.Sprintf("cli-test-%d-%d", os.Getpid(), capSeq.Add(1))
	config := filepath.Join(t.TempDir(), "c.yaml")
	body := "capacity:\n  limits:\n    " + provider + "/stt: {limit: 8, batch_reserve: 2}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvRedisURL: redisURL}
	rdb := testredis.Client(t)
	t.Cleanup(func() { testredis.DeleteMatching(rdb, "*{"+provider+"/*") })
	ctx := context.Background()
	code, out, stderr := run(t, ctx, env, "--config", config, "capacity", "status")
	if code != 0 || !strings.Contains(out, provider) || !strings.Contains(out, "8") {
		t.Fatalf("status: %d\n%s\n%s", code, out, stderr)
	}
	if code, _, stderr := run(t, ctx, env, "--config", config, "capacity", "set-limit", provider, "stt", "5"); code != 0 {
		t.Fatalf("set-limit: %s", stderr)
	}
	_, out, _ = run(t, ctx, env, "--config", config, "capacity", "status")
	fields := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, provider) {
			fields = strings.Join(strings.Fields(line), " ")
		}
	}
	if fields != provider+" stt 0 8 5 -" {
		t.Fatalf("status after set-limit: %q\n%s", fields, out)
	}
	if code, _, stderr := run(t, ctx, env, "--config", config, "capacity", "set-limit", provider, "stt", "many"); code == 0 || !strings.Contains(stderr, "whole number") {
		t.Fatalf("bad limit accepted: %q", stderr)
	}
	if code, _, stderr := run(t, ctx, nil, "--config", config, "capacity", "status"); code == 0 || !strings.Contains(stderr, csconfig.EnvRedisURL) {
		t.Fatalf("status without Redis: %q", stderr)
	}
}
