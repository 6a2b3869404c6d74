package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/internal/testredis"
)

func TestCLICallerIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	org := fmt.Sprintf("cli-cid-%d-%d", os.Getpid(), capSeq.Add(1))
	rdb := testredis.Client(t)
	t.Cleanup(func() { testredis.DeleteMatching(rdb, capacity.KeyPrefixDefault+":{"+org+"}:*") })
	env := map[string]string{config.EnvRedisURL: testredis.URL()}

	code, out, stderr := run(t, ctx, env, "caller-ids", "add", "--org", org, "+14155550102", "+14155550101")
	if code != 0 || !strings.Contains(out, "2 added, 0 already there") {
		t.Fatalf("add: %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(t, ctx, env, "caller-ids", "add", "--org", org, "+14155550101", "+14155550103")
	if code != 0 || !strings.Contains(out, "1 added, 1 already there") {
		t.Fatalf("add again: %d\n%s\n%s", code, out, stderr)
	}
	// A bad number names itself and adds nothing.
	code, _, stderr = run(t, ctx, env, "caller-ids", "add", "--org", org, "+14155550104", "4155550105")
	if code == 0 || !strings.Contains(stderr, `"4155550105"`) || !strings.Contains(stderr, "numbers[1]") {
		t.Fatalf("add of a bad number: %d %q", code, stderr)
	}

	// A call holds a number, taken through the library as the API does.
	r, err := capacity.NewRedis(capacity.RedisConfig{Client: rdb})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := capacity.NewCallerIDs(r, capacity.CallerIDsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	held, err := pool.Acquire(ctx, org, "call-7")
	if err != nil || held.Number != "+14155550101" {
		t.Fatalf("Acquire = %+v, %v", held, err)
	}
	code, out, stderr = run(t, ctx, env, "caller-ids", "list", "--org", org)
	if code != 0 {
		t.Fatalf("list: %d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NUMBER") {
		t.Fatalf("list:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) != 5 || f[0] != "+14155550101" || f[1] != "busy" || f[4] != "call-7" {
		t.Fatalf("list line of the held number: %q", lines[1])
	}
	if f := strings.Join(strings.Fields(lines[2]), " "); f != "+14155550102 free - -" {
		t.Fatalf("list line of a free number: %q", f)
	}
	code, out, _ = run(t, ctx, env, "caller-ids", "list", "--org", org, "--json")
	var got struct {
		Org     string                   `json:"org"`
		Numbers []capacity.CallerIDState `json:"numbers"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Org != org || len(got.Numbers) != 3 ||
		got.Numbers[0].CallID != "call-7" || got.Numbers[0].BusySince.IsZero() || got.Numbers[2].State != "free" {
		t.Fatalf("list --json: %d %v\n%s", code, err, out)
	}

	// A held number is not removed without --force, and nothing else is either.
	code, _, stderr = run(t, ctx, env, "caller-ids", "remove", "--org", org, "+14155550103", held.Number)
	if code == 0 || !strings.Contains(stderr, held.Number) || !strings.Contains(stderr, "in use") {
		t.Fatalf("remove of a held number: %d %q", code, stderr)
	}
	code, out, stderr = run(t, ctx, env, "caller-ids", "remove", "--org", org, "+14155550103", "+14155550199", "--json")
	if code != 0 || strings.TrimSpace(out) != fmt.Sprintf(`{"not_there":1,"org":%q,"removed":1}`, org) {
		t.Fatalf("remove --json: %d %q %s", code, out, stderr)
	}
	code, out, stderr = run(t, ctx, env, "caller-ids", "remove", "--org", org, "--force", held.Number)
	if code != 0 || !strings.Contains(out, "1 removed") {
		t.Fatalf("remove --force: %d %q %s", code, out, stderr)
	}
	if freed, err := pool.Release(ctx, org, held.Number, held.Token); freed || err != nil {
		t.Fatalf("release of a removed number = %v, %v; want false", freed, err)
	}
	_, out, _ = run(t, ctx, env, "caller-ids", "list", "--org", org)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "+14155550102") {
		t.Fatalf("list after removals:\n%s", out)
	}

	// Usage mistakes.
	if code, _, stderr := run(t, ctx, env, "caller-ids", "list"); code == 0 || !strings.Contains(stderr, "org") {
		t.Fatalf("list without --org: %d %q", code, stderr)
	}
	if code, _, stderr := run(t, ctx, env, "caller-ids", "list", "--org", "a:b"); code == 0 || !strings.Contains(stderr, "org") {
		t.Fatalf("list with a bad org: %d %q", code, stderr)
	}
	if code, _, stderr := run(t, ctx, nil, "caller-ids", "list", "--org", org); code == 0 || !strings.Contains(stderr, config.EnvRedisURL) {
		t.Fatalf("list without Redis: %d %q", code, stderr)
	}
}
