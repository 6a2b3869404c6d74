package progress

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for lineProgress.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(d time.Duration, start time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = start.Add(d)
}

// lineProgressOn returns New's report on w, which must not be a
// terminal, with its clock replaced by clock (started at start).
func lineProgressOn(t *testing.T, w io.Writer, desc string, max int64, unit Unit,
	clock *fakeClock, start time.Time) *lineProgress {
	t.Helper()
	p, ok := New(w, desc, max, unit).(*lineProgress)
	if !ok {
		t.Fatalf("New on a %T = %T, want *lineProgress (not a terminal)", w, New(w, desc, max, unit))
	}
	if p.Interval != lineInterval || lineInterval != 5*time.Second {
		t.Fatalf("Interval = %s, want 5s", p.Interval)
	}
	clock.set(0, start)
	p.Now, p.start, p.last = clock.Now, start, start
	return p
}

// Off a terminal, progress is a plain line at most every Interval and a
// last one on Finish, never a carriage return.
func TestProgressOffATerminalWritesLines(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var clock fakeClock
	var buf bytes.Buffer
	p := lineProgressOn(t, &buf, "settling", 36, Count, &clock, start)

	steps := []struct {
		at time.Duration
		n  int
	}{
		{1 * time.Second, 3},
		{4900 * time.Millisecond, 8},
		{5 * time.Second, 10}, // 5s since the start: a line
		{7 * time.Second, 20},
		{9900 * time.Millisecond, 22},
		{12300 * time.Millisecond, 24}, // 7.3s since the last line: a line
		{13 * time.Second, 30},
	}
	for _, s := range steps {
		clock.set(s.at, start)
		if err := p.Set(s.n); err != nil {
			t.Fatal(err)
		}
		if err := p.Clear(); err != nil {
			t.Fatal(err)
		}
	}
	clock.set(14*time.Second, start)
	if err := p.Finish(); err != nil {
		t.Fatal(err)
	}
	// Nothing after Finish.
	clock.set(60*time.Second, start)
	_ = p.Set(36)
	_ = p.Finish()

	want := "settling: 10/36 (27%), 5.0s\n" +
		"settling: 24/36 (66%), 12.3s\n" +
		"settling: 30/36 (83%), 14.0s\n" // the count reached, not the maximum
	if got := buf.String(); got != want {
		t.Errorf("progress wrote\n%q\nwant\n%q", got, want)
	}
	if strings.ContainsRune(buf.String(), '\r') {
		t.Errorf("progress off a terminal wrote a carriage return: %q", buf.String())
	}
}

func TestProgressOffATerminalLineForms(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		max  int64
		unit Unit
		n    int64
		want string
	}{
		{"count", 12, Count, 12, "d: 12/12 (100%), 5.0s\n"},
		{"nothing to do", 0, Count, 0, "d: 0/0 (100%), 5.0s\n"},
		{"bytes", 3_400_000, Bytes, 1_200_000, "d: 1.2 MB/3.4 MB (35%), 5.0s\n"},
		{"bytes, small", 906, Bytes, 450, "d: 450 B/906 B (49%), 5.0s\n"},
		{"bytes, unknown size (a pipe)", -1, Bytes, 2_500, "d: 2.5 kB, 5.0s\n"},
		{"count, unknown", -1, Count, 7, "d: 7, 5.0s\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var clock fakeClock
			var buf bytes.Buffer
			p := lineProgressOn(t, &buf, "d", tt.max, tt.unit, &clock, start)
			clock.set(5*time.Second, start)
			_ = p.Set64(tt.n)
			if got := buf.String(); got != tt.want {
				t.Errorf("line %q, want %q", got, tt.want)
			}
		})
	}
}

// A file is no terminal either: `make demo > demo.log 2>&1`.
func TestProgressToAFileWritesLines(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "demo.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	p := New(f, "settling", 3, Count)
	if _, ok := p.(*lineProgress); !ok {
		t.Fatalf("New on a regular file = %T, want *lineProgress", p)
	}
	for n := range 4 {
		_ = p.Set(n)
	}
	_ = p.Finish()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	// A fast run writes only the last line.
	if got := string(b); !strings.HasPrefix(got, "settling: 3/3 (100%), ") || strings.Count(got, "\n") != 1 || strings.ContainsRune(got, '\r') {
		t.Errorf("demo.log = %q, want one line \"settling: 3/3 (100%%), …s\"", got)
	}
}

// The ingest committer sets the report while the reader goroutine runs;
// lineProgress must be safe for that (go test -race).
func TestProgressOffATerminalConcurrent(t *testing.T) {
	t.Parallel()
	var buf syncedBuffer
	p := newLineProgress(&buf, "replaying", 1000, Count)
	p.Interval = time.Millisecond
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for n := range 250 {
				_ = p.Set(g*250 + n)
				if n%50 == 0 {
					time.Sleep(2 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	_ = p.Finish()
	out := buf.String()
	if strings.ContainsRune(out, '\r') || !strings.HasSuffix(out, "\n") {
		t.Errorf("progress = %q", out)
	}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(l, "replaying: ") || !strings.HasSuffix(l, "s") {
			t.Errorf("malformed line %q", l)
		}
	}
}

type syncedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0 B", 999: "999 B", 1000: "1.0 kB", 1_500: "1.5 kB",
		1_000_000: "1.0 MB", 3_400_000: "3.4 MB", 2_000_000_000: "2.0 GB",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
