package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/internal/testdb"
)

func TestTestenvRunsTheCommandWithURLs(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"TEST_DATABASE_URL": testdb.ServerURL(),
		"TEST_REDIS_URL":    os.Getenv("TEST_REDIS_URL"),
	}
	var out, stderr bytes.Buffer
	code := run(context.Background(), []string{"--", "sh", "-c", `echo "db=$TEST_DATABASE_URL"; exit 3`}, &out, &stderr,
		func(k string) string { return env[k] })
	if code != 3 {
		t.Fatalf("exit code %d, want the child's 3\n%s", code, stderr.String())
	}
	if !strings.Contains(out.String(), "db="+testdb.ServerURL()) {
		t.Fatalf("child did not see TEST_DATABASE_URL: %q", out.String())
	}
}
