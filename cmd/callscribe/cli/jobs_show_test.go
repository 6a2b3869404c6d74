package cli_test

import (
	"context"
	"strings"
	"testing"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
)

// A reason stored with control characters in it (a row written before the
// adapters stripped them, or an operator's --reason) is printed by jobs
// show with them escaped: the ESC never reaches the terminal.
func TestJobsShowEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	dir := t.TempDir()
	config := northlineConfig(t, dir)
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	if code, out, stderr := run(t, ctx, env, "--config", config, "ingest", "--tenant", "northline", "--call", "call-1001",
		"--audio", "northline/call-1001.wav"); code != 0 {
		t.Fatalf("ingest: %d\n%s\n%s", code, out, stderr)
	}
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := l.RecordingsByCall(ctx, "northline", "call-1001")
	if err != nil || len(recs) != 1 {
		t.Fatalf("RecordingsByCall: %v %v", recs, err)
	}
	if _, err := l.Note(ctx, ledger.Note{RecordingID: recs[0].ID, State: recs[0].State,
		Reason: "vendor said \x1b[2J\x1b]0;owned\x07 go away\u009b", ResponseClass: "bad\x1bclass"}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, ctx, env, "--config", config, "jobs", "show", "--tenant", "northline", "--call", "call-1001")
	if code != 0 {
		t.Fatalf("jobs show: %d\n%s\n%s", code, out, stderr)
	}
	if strings.ContainsAny(out, "\x1b\x07\u009b") {
		t.Errorf("jobs show printed a raw control character:\n%q", out)
	}
	if !strings.Contains(out, `vendor said \x1b[2J\x1b]0;owned\x07 go away\u009b`) || !strings.Contains(out, `bad\x1bclass`) {
		t.Errorf("jobs show does not show the escaped reason:\n%s", out)
	}
}
