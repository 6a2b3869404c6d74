package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	csconfig "github.com/callscribe/callscribe/cmd/callscribe/internal/config"

	"github.com/callscribe/callscribe/internal/jsonkeys"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
)

// A manifest with good and bad lines: every bad line is reported with its
// number and reason, every good one is kept, and the exit code says so.
func TestIngestManifestKeepsGoodLinesAndNamesBadOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	dir := t.TempDir()
	recordings, err := filepath.Abs("../../../testdata/recordings")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "callscribe.yaml")
	body := "audio:\n  root: " + recordings + "\npipeline:\n  tenants:\n" +
		"    northline: {provider: generic-http, base_url: 'http://127.0.0.1:1', api_key: k}\n" +
		"    harbor: {provider: generic-http, base_url: 'http://127.0.0.1:1', api_key: k}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "m.jsonl")
	lines := []string{
		`{"tenant_id":"northline","call_id":"call-1001","audio":"northline/call-1001.wav","lane":"immediate"}`,
		`{"tenant_id":"northline","call_id":"call-1002","audio":"northline/call-1002.wav"`,          // 2: malformed JSON
		`{"tenant_id":"nobody","call_id":"c","audio":"northline/call-1003.wav"}`,                    // 3: unknown tenant
		`{"tenant_id":"harbor","call_id":"call-2001","audio":"../../etc/passwd"}`,                   // 4: outside the root
		`{"tenant_id":"harbor","call_id":"call-2002","audio":"harbor/missing.wav"}`,                 // 5: missing audio
		`{"tenant_id":"harbor","call_id":"call-2003","audio":"harbor/call-2003.wav","lane":"slow"}`, // 6: bad lane
		``,
		`{"tenant_id":"harbor","call_id":"call-2004","audio":"harbor/call-2004.wav","started_at":"2026-11-27T10:00:00-08:00"}`,
		`{"tenant_id":"northline","call_id":"call-1001","audio":"northline/call-1001.wav"}`, // 9: a repeat: already known
	}
	if err := os.WriteFile(manifest, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	code, out, stderr := run(t, ctx, env, "--config", config, "ingest", "--manifest", manifest)
	if code == 0 {
		t.Fatalf("bad lines must fail the command:\n%s\n%s", out, stderr)
	}
	if !strings.Contains(out, "2 ingested, 1 already known, 5 bad lines") {
		t.Fatalf("summary: %q", out)
	}
	for _, want := range []string{"m.jsonl:2:", "m.jsonl:3: unknown tenant \"nobody\"", "m.jsonl:4:", "m.jsonl:5:", "m.jsonl:6: lane: \"slow\""} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not report %q:\n%s", want, stderr)
		}
	}
	// stderr is no terminal here: progress is plain lines, the last one
	// the whole manifest, and no carriage-return redraws of a bar.
	if strings.ContainsRune(stderr, '\r') {
		t.Errorf("stderr (not a terminal) has carriage returns:\n%q", stderr)
	}
	if !regexp.MustCompile(`(?m)^ingesting: (\d+) B/(\d+) B \(100%\), \d+\.\ds$`).MatchString(stderr) {
		t.Errorf("stderr has no last progress line \"ingesting: N B/N B (100%%), …s\":\n%s", stderr)
	}
	code, out, stderr = run(t, ctx, env, "--config", config, "jobs", "list", "--json")
	if code != 0 {
		t.Fatalf("jobs list: %s", stderr)
	}
	var listed []map[string]any
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("jobs list --json: %d recordings (%v)\n%s", len(listed), err, out)
	}
	// The printed keys are ledger.Recording's documented names (docs/json.md).
	wantKeys, err := jsonkeys.Keys(ledger.Recording{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range listed {
		for _, k := range wantKeys {
			if _, ok := rec[k]; !ok {
				t.Errorf("jobs list --json: a recording without %q: %v", k, rec)
			}
		}
		if len(rec) != len(wantKeys) {
			t.Errorf("jobs list --json: %d keys, want %d (%v): %v", len(rec), len(wantKeys), wantKeys, rec)
		}
	}
	code, out, _ = run(t, ctx, env, "--config", config, "jobs", "show", "--tenant", "harbor", "--call", "call-2004")
	if code != 0 || !strings.Contains(out, "received") || !strings.Contains(out, "harbor:call-2004:") {
		t.Fatalf("jobs show: %d\n%s", code, out)
	}
	code, _, stderr = run(t, ctx, env, "--config", config, "ingest", "--tenant", "nobody", "--call", "c", "--audio", "northline/call-1001.wav")
	if code == 0 || !strings.Contains(stderr, "unknown tenant") {
		t.Fatalf("single ingest of an unknown tenant: %d %s", code, stderr)
	}
	// Without --lane the rule routes: a CRM action due in 20 minutes is
	// sooner than the batch lane's completion bound.
	soon := time.Now().Add(20 * time.Minute).UTC().Format(time.RFC3339)
	code, out, stderr = run(t, ctx, env, "--config", config, "ingest", "--tenant", "northline", "--call", "call-route", "--audio", "northline/call-1003.wav",
		"--action-deadline", soon)
	if code != 0 || !strings.Contains(out, "on immediate (CRM action deadline in ") {
		t.Fatalf("ingest --action-deadline: %d %s %s", code, out, stderr)
	}
	code, _, stderr = run(t, ctx, env, "--config", config, "ingest", "--tenant", "northline", "--call", "c", "--audio", "northline/call-1003.wav",
		"--action-deadline", "tomorrow")
	if code == 0 || !strings.Contains(stderr, "--action-deadline \"tomorrow\": want RFC 3339") {
		t.Fatalf("a bad --action-deadline: %d %s", code, stderr)
	}
}

// An over-long line and a line with data after its JSON object are each
// reported with their number and skipped; a NUL or a 100 KB call id and a
// text file named .wav are refused by name; every other line is kept.
func TestIngestManifestRefusesOverlongAndTrailingLines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	dir := t.TempDir()
	recordings := filepath.Join(dir, "recordings")
	src, err := filepath.Abs("../../../testdata/recordings")
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"northline/call-1001.wav", "northline/call-1002.wav", "harbor/call-2003.wav"} {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(recordings, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(recordings, rel), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(recordings, "harbor", "notes.wav"), []byte("not audio\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "callscribe.yaml")
	body := "audio:\n  root: " + recordings + "\npipeline:\n  tenants:\n" +
		"    northline: {provider: generic-http, base_url: 'http://127.0.0.1:1', api_key: k}\n" +
		"    harbor: {provider: generic-http, base_url: 'http://127.0.0.1:1', api_key: k}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "m.jsonl")
	lines := []string{
		`{"tenant_id":"northline","call_id":"call-1001","audio":"northline/call-1001.wav"}`,
		`{"tenant_id":"northline","call_id":"x","audio":"northline/call-1002.wav","language":"` + strings.Repeat("e", 2<<20) + `"}`, // 2: 2 MiB
		`{"tenant_id":"northline","call_id":"call-1002","audio":"northline/call-1002.wav"} trailing junk`,                           // 3
		`{"tenant_id":"northline","call_id":"call-1002","audio":"northline/call-1002.wav"}{"tenant_id":"harbor"}`,                   // 4
		`{"tenant_id":"harbor","call_id":"call\u0000-1","audio":"harbor/call-2003.wav"}`,                                            // 5: NUL
		`{"tenant_id":"harbor","call_id":"` + strings.Repeat("c", 100_000) + `","audio":"harbor/call-2003.wav"}`,                    // 6: over the line cap
		`{"tenant_id":"harbor","call_id":"` + strings.Repeat("c", 200) + `","audio":"harbor/call-2003.wav"}`,                        // 7: 200-byte id
		`{"tenant_id":"harbor","call_id":"call-2099","audio":"harbor/notes.wav"}`,                                                   // 8: text named .wav
		`{"tenant_id":"harbor","call_id":"call-2003","audio":"harbor/call-2003.wav"}  `,                                             // 9: trailing spaces are fine
		`{"tenant_id":"northline","call_id":"call-1002","audio":"northline/call-1002.wav"}`,                                         // 10
	}
	if err := os.WriteFile(manifest, []byte(strings.Join(lines, "\r\n")+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	code, out, stderr := run(t, ctx, env, "--config", config, "ingest", "--manifest", manifest)
	if code == 0 {
		t.Fatalf("bad lines must fail the command:\n%s\n%s", out, stderr)
	}
	if !strings.Contains(out, "3 ingested, 0 already known, 7 bad lines") {
		t.Fatalf("summary: %q\n%s", out, stderr)
	}
	for _, want := range []string{
		"m.jsonl:2: line longer than 65536 bytes",
		"m.jsonl:3: data after the JSON object",
		"m.jsonl:4: data after the JSON object",
		"m.jsonl:5: call_id: control character U+0000",
		"m.jsonl:6: line longer than 65536 bytes",
		"m.jsonl:7: call_id: 200 bytes long, over the 128-byte limit",
		`m.jsonl:8: recording "harbor/notes.wav" is named .wav`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not report %q:\n%.2000s", want, stderr)
		}
	}
	if len(stderr) > 20_000 {
		t.Errorf("stderr echoes the long lines: %d bytes", len(stderr))
	}
}

// A manifest longer than a chunk is ingested chunk by chunk: a bad line in
// the middle is reported by its number and the rest kept, repeats inside
// and across chunks converge, and ingesting the whole manifest again
// creates nothing.
func TestIngestManifestAcrossChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	dir := t.TempDir()
	config := northlineConfig(t, dir)
	const distinct = 1100
	var b strings.Builder
	for i := range distinct + 300 { // lines 1101..1400 repeat calls 0..299 (a chunk or two back)
		if i == 776 {
			b.WriteString(`{"tenant_id":"northline","call_id":"bad","audio":"northline/call-1001.wav","lane":"slow"}` + "\n") // line 777
			continue
		}
		fmt.Fprintf(&b, `{"tenant_id":"northline","call_id":"c-%d","audio":"northline/call-1001.wav"}`+"\n", i%distinct)
	}
	manifest := filepath.Join(dir, "m.jsonl")
	if err := os.WriteFile(manifest, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	code, out, stderr := run(t, ctx, env, "--config", config, "ingest", "--manifest", manifest)
	if code == 0 || !strings.Contains(out, fmt.Sprintf("%d ingested, 300 already known, 1 bad lines", distinct-1)) {
		t.Fatalf("first run: %d %q\n%.2000s", code, out, stderr)
	}
	if !strings.Contains(stderr, `m.jsonl:777: lane: "slow"`) {
		t.Errorf("stderr does not name line 777:\n%.2000s", stderr)
	}
	code, out, stderr = run(t, ctx, env, "--config", config, "ingest", "--manifest", manifest)
	if code == 0 || !strings.Contains(out, fmt.Sprintf("0 ingested, %d already known, 1 bad lines", distinct-1+300)) {
		t.Fatalf("second run: %d %q\n%.2000s", code, out, stderr)
	}
	var rows, eligible, jobs int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'eligible'),
		(SELECT count(*) FROM river_job WHERE kind = 'transcribe') FROM recordings`).Scan(&rows, &eligible, &jobs); err != nil {
		t.Fatal(err)
	}
	if rows != distinct-1 || eligible != rows || jobs != rows {
		t.Fatalf("%d recordings (%d eligible), %d jobs; want %d of each", rows, eligible, jobs, distinct-1)
	}
}

// While one chunk is written the next is read: the bad lines are still
// reported once each, in line order, whether refused when read (a bad
// lane) or when their audio was read (a missing file), across chunks.
func TestIngestManifestReportsBadLinesInOrderAcrossChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	dir := t.TempDir()
	config := northlineConfig(t, dir)
	badLane := map[int]bool{3: true, 640: true, 1499: true}
	missing := map[int]bool{2: true, 700: true, 1200: true}
	var b strings.Builder
	for line := 1; line <= 1500; line++ {
		switch {
		case badLane[line]:
			fmt.Fprintf(&b, `{"tenant_id":"northline","call_id":"l-%d","audio":"northline/call-1001.wav","lane":"slow"}`+"\n", line)
		case missing[line]:
			fmt.Fprintf(&b, `{"tenant_id":"northline","call_id":"m-%d","audio":"northline/none-%d.wav"}`+"\n", line, line)
		default:
			fmt.Fprintf(&b, `{"tenant_id":"northline","call_id":"c-%d","audio":"northline/call-1001.wav"}`+"\n", line)
		}
	}
	manifest := filepath.Join(dir, "m.jsonl")
	if err := os.WriteFile(manifest, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	code, out, stderr := run(t, ctx, env, "--config", config, "ingest", "--manifest", manifest)
	if code == 0 || !strings.Contains(out, "1494 ingested, 0 already known, 6 bad lines") {
		t.Fatalf("ingest: %d %q\n%.2000s", code, out, stderr)
	}
	var got []int
	for _, l := range strings.Split(stderr, "\n") {
		var n int
		if i := strings.Index(l, "m.jsonl:"); i >= 0 {
			if _, err := fmt.Sscanf(l[i+len("m.jsonl:"):], "%d:", &n); err == nil {
				got = append(got, n)
			}
		}
	}
	if want := []int{2, 3, 640, 700, 1200, 1499}; !slices.Equal(got, want) {
		t.Fatalf("bad lines reported %v, want %v in that order\n%.2000s", got, want, stderr)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM recordings`).Scan(&rows); err != nil || rows != 1494 {
		t.Fatalf("%d recordings (%v), want 1494", rows, err)
	}
}

// northlineConfig writes a config in dir with testdata/recordings as the
// audio root and the tenant northline (a vendor nobody answers at), and
// returns its path.
func northlineConfig(t *testing.T, dir string) string {
	t.Helper()
	recordings, err := filepath.Abs("../../../testdata/recordings")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "callscribe.yaml")
	body := "audio:\n  root: " + recordings + "\npipeline:\n  tenants:\n" +
		"    northline: {provider: generic-http, base_url: 'http://127.0.0.1:1', api_key: k}\n"
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return config
}

// A chunk whose transaction fails stops the ingest and loses nothing:
// the error names the chunk's lines, the chunks before it are kept
// whatever was written beside it (chunks are written ingestInFlight at a
// time), and ingesting the manifest again takes the rest, counting the
// lines already in as known.
func TestIngestManifestChunkFailureKeepsTheChunksBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	dir := t.TempDir()
	config := northlineConfig(t, dir)
	const lines = 3500
	var b strings.Builder
	for i := 1; i <= lines; i++ {
		call := fmt.Sprintf("c-%d", i)
		if i == 1500 {
			call = "boom"
		}
		fmt.Fprintf(&b, `{"tenant_id":"northline","call_id":%q,"audio":"northline/call-1001.wav"}`+"\n", call)
	}
	manifest := filepath.Join(dir, "m.jsonl")
	if err := os.WriteFile(manifest, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// The database refuses the one recording: its whole chunk's
	// transaction fails.
	if _, err := pool.Exec(ctx, `
		CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
		BEGIN
			IF NEW.call_id = 'boom' THEN RAISE EXCEPTION 'refused by the test'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_boom BEFORE INSERT ON recordings FOR EACH ROW EXECUTE FUNCTION refuse_boom();`); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{csconfig.EnvDatabaseURL: testdb.URLOf(t, pool)}
	code, out, stderr := run(t, ctx, env, "--config", config, "ingest", "--manifest", manifest)
	if code == 0 || !strings.Contains(stderr, "lines 1001 to 2000") || !strings.Contains(stderr, "refused by the test") {
		t.Fatalf("ingest with a failing chunk: %d %q\n%.2000s", code, out, stderr)
	}
	var first, failing, rest int
	if err := pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE substr(call_id, 3)::int <= 1000),
		count(*) FILTER (WHERE substr(call_id, 3)::int BETWEEN 1001 AND 2000),
		count(*) FILTER (WHERE substr(call_id, 3)::int > 2000)
		FROM recordings WHERE call_id LIKE 'c-%'`).Scan(&first, &failing, &rest); err != nil {
		t.Fatal(err)
	}
	if first != 1000 || failing != 0 || (rest != 0 && rest != 1000) {
		t.Fatalf("after the failure: %d of lines 1-1000, %d of 1001-2000, %d after; want 1000, 0, and 0 or a whole chunk", first, failing, rest)
	}

	if _, err := pool.Exec(ctx, `DROP TRIGGER refuse_boom ON recordings`); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run(t, ctx, env, "--config", config, "ingest", "--manifest", manifest)
	if want := fmt.Sprintf("%d ingested, %d already known, 0 bad lines", lines-first-rest, first+rest); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("ingesting again: %d %q, want %q\n%.2000s", code, out, want, stderr)
	}
	var rows, jobs int
	if err := pool.QueryRow(ctx, `SELECT count(*), (SELECT count(*) FROM river_job WHERE kind = 'transcribe') FROM recordings`).Scan(&rows, &jobs); err != nil {
		t.Fatal(err)
	}
	if rows != lines || jobs != lines {
		t.Fatalf("%d recordings and %d jobs after the second run, want %d of each", rows, jobs, lines)
	}
}
