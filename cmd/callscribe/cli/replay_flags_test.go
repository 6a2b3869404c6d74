package cli_test

import (
	"context"
	"strings"
	"testing"
)

// replay's flags are checked before anything is opened, naming the flag.
func TestReplayFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := writeFile(t, dir, "c.yaml", "crm_targets:\n  staging: {kind: webhook, base_url: 'http://127.0.0.1:3', token: s}\n", 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01"}, "give --from, --to and --target"},
		{[]string{"replay", "--from", "yesterday", "--to", "2026-02-01", "--target", "staging"}, "--from"},
		{[]string{"replay", "--from", "2026-02-01", "--to", "2026-01-01", "--target", "staging"}, "is not after"},
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01", "--target", "nope"}, "configured: staging"},
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01", "--target", "staging", "--max-rate", "-3"}, "--max-rate"},
		{[]string{"replay", "--from", "2026-01-01", "--to", "2026-02-01", "--target", "staging", "--state", "done"}, "--state"},
		{[]string{"replay", "status", "x"}, `run "x"`},
		{[]string{"replay", "cancel", "0"}, `run "0"`},
	} {
		code, _, stderr := run(t, context.Background(), nil, append([]string{"--config", cfgPath}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("callscribe %v = %d, %q; want an error naming %q", c.args, code, stderr, c.want)
		}
	}
}
