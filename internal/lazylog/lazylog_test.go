package lazylog

import (
	"bytes"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// TestLazyWritesWhatTheHandlerWrites draws a tree of loggers made by
// With and WithGroup (attributes of every kind, nested groups, empty
// ones) and records written through any of them in any order, and checks
// that the JSON and text handlers behind lazylog write the same bytes as
// without it.
func TestLazyWritesWhatTheHandlerWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		json := rapid.Bool().Draw(t, "json")
		mk := func(buf *bytes.Buffer) slog.Handler {
			opts := &slog.HandlerOptions{Level: slog.LevelDebug,
				// a fixed time, so that the two outputs can be compared
				ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey && len(groups) == 0 {
						return slog.String(slog.TimeKey, "t")
					}
					return a
				}}
			if json {
				return slog.NewJSONHandler(buf, opts)
			}
			return slog.NewTextHandler(buf, opts)
		}
		var want, got bytes.Buffer
		eager := []*slog.Logger{slog.New(mk(&want))}
		lazy := []*slog.Logger{slog.New(New(mk(&got)))}
		for i := range rapid.IntRange(1, 30).Draw(t, "steps") {
			k := rapid.IntRange(0, len(eager)-1).Draw(t, "logger")
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				args := drawArgs(t)
				eager = append(eager, eager[k].With(args...))
				lazy = append(lazy, lazy[k].With(args...))
			case 1:
				g := rapid.SampledFrom([]string{"", "g", "h", "nested"}).Draw(t, "group")
				eager = append(eager, eager[k].WithGroup(g))
				lazy = append(lazy, lazy[k].WithGroup(g))
			default:
				msg := fmt.Sprint("record ", i)
				args := drawArgs(t)
				eager[k].Info(msg, args...)
				lazy[k].Info(msg, args...)
			}
		}
		if got.String() != want.String() {
			t.Fatalf("lazylog wrote\n%s\nthe handler alone\n%s", got.String(), want.String())
		}
	})
}

func drawArgs(t *rapid.T) []any {
	var args []any
	for i := range rapid.IntRange(0, 4).Draw(t, "attrs") {
		key := rapid.SampledFrom([]string{"recording_id", "tenant", "k", "a b", ""}).Draw(t, "key")
		switch rapid.IntRange(0, 4).Draw(t, "kind") {
		case 0:
			args = append(args, slog.String(key, rapid.String().Draw(t, "s")))
		case 1:
			args = append(args, slog.Int64(key, rapid.Int64().Draw(t, "n")))
		case 2:
			args = append(args, slog.Bool(key, rapid.Bool().Draw(t, "b")))
		case 3:
			args = append(args, slog.Group(key, slog.Int("i", i), slog.String("s", "v")))
		default:
			args = append(args, slog.Group(key)) // an empty group: no output
		}
	}
	return args
}

// TestLazyLoggerFromManyGoroutines writes through one logger made by
// With from many goroutines at once (its formatted handler is made by the
// first): every record carries the attributes, under -race.
func TestLazyLoggerFromManyGoroutines(t *testing.T) {
	var buf syncBuffer
	l := slog.New(New(slog.NewTextHandler(&buf, nil))).With("recording_id", "r1")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { l.Info("step", "i", i) })
	}
	wg.Wait()
	if n := bytes.Count(buf.Bytes(), []byte("recording_id=r1")); n != 16 {
		t.Fatalf("%d of 16 records carry the With attribute:\n%s", n, buf.Bytes())
	}
}

// BenchmarkWithNothingWritten is a job's logger made and not written to:
// the JSON handler formats With's five attributes; lazylog keeps them.
func BenchmarkWithNothingWritten(b *testing.B) {
	for _, lazy := range []bool{false, true} {
		h := slog.Handler(slog.NewJSONHandler(&bytes.Buffer{}, nil))
		name := "json"
		if lazy {
			h, name = New(h), "lazylog"
		}
		l := slog.New(h)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_ = l.With(slog.String("recording_id", "0190b1e2-7c4f-7d2a-9a51-3f0e9c1d2b4a"), slog.String("tenant", "northline"),
					slog.String("call_id", "call-000123"), slog.String("scope", "stt:generic"), slog.Int64("job_id", 123456))
			}
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}
