package outbox_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The outbox reads the ledger only through the ledger's methods: its SQL
// names no table that another part of callscribe owns. The outbox's own
// tables are those the migrations its sqlc.yaml lists create.
func TestOutboxSQLNamesNoLedgerTable(t *testing.T) {
	t.Parallel()
	createTable := regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)
	migrations, err := filepath.Glob(filepath.Join("..", "migrations", "*.sql"))
	if err != nil || len(migrations) == 0 {
		t.Fatalf("no migrations found (%v)", err)
	}
	listed := readFile(t, filepath.Join("internal", "dbsqlc", "sqlc.yaml"))
	own, foreign := map[string]bool{}, map[string]bool{}
	for _, path := range migrations {
		up, _, _ := strings.Cut(readFile(t, path), "-- +goose Down")
		for _, m := range createTable.FindAllStringSubmatch(stripComments(up), -1) {
			if strings.Contains(listed, "migrations/"+filepath.Base(path)) {
				own[strings.ToLower(m[1])] = true
			} else {
				foreign[strings.ToLower(m[1])] = true
			}
		}
	}
	for _, want := range []string{"recordings", "recording_events", "transcripts", "scope_deferrals"} {
		if !foreign[want] {
			t.Fatalf("ledger tables found in the migrations %v lack %s: the scan is broken", keys(foreign), want)
		}
	}
	if !own["outbox"] || !own["action_sets"] || !own["replay_runs"] {
		t.Fatalf("outbox tables found in the migrations: %v, want outbox, action_sets and replay_runs among them", keys(own))
	}

	queries, err := filepath.Glob(filepath.Join("internal", "dbsqlc", "*.sql"))
	if err != nil || len(queries) == 0 {
		t.Fatalf("no outbox query files found (%v)", err)
	}
	word := regexp.MustCompile(`[a-z_][a-z0-9_]*`)
	for _, path := range queries {
		for _, w := range word.FindAllString(strings.ToLower(stripComments(readFile(t, path))), -1) {
			if foreign[w] {
				t.Errorf("%s names %s, a table the outbox does not own: read it through the ledger's API", path, w)
			}
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stripComments removes SQL line comments.
func stripComments(sql string) string {
	lines := strings.Split(sql, "\n")
	for i, l := range lines {
		l, _, _ = strings.Cut(l, "--")
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
