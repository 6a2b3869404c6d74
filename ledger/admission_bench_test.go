package ledger_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
)

// admissionReaders is how many goroutines read one scope at once in
// BenchmarkAdmissionRead: a worker's transcription and delivery workers.
const admissionReaders = 20

// BenchmarkAdmissionRead measures a step's read of its recording with its
// scope's deferral (ledger.RecordingWithScope) by admissionReaders
// goroutines at once, every one on the same scope, as a worker's steps
// read it, in reads/s; and, in the same run on the same database, two
// baselines: the read of the recording alone (the floor: no scope, no
// wait), and the statement the read was before migration 00020 (the
// scope's row FOR SHARE in the same statement, a row lock per read).
//
//	go run ./internal/cmd/testenv -- go test -run '^$' -bench AdmissionRead -benchtime 20000x ./ledger/
func BenchmarkAdmissionRead(b *testing.B) {
	ctx := context.Background()
	pool := testdb.New(b)
	cfg := pool.Config()
	cfg.MaxConns = admissionReaders
	big, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(big.Close)
	c := clock.NewStepping(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), time.Millisecond)
	l, err := ledger.New(big, &ledger.Config{Clock: c})
	if err != nil {
		b.Fatal(err)
	}
	res, err := l.Ingest(ctx, newRecording())
	if err != nil {
		b.Fatal(err)
	}
	id := res.Recording.ID
	const scope = "bench:hot"
	if _, err := l.ScopeAdmit(ctx, scope, 1, time.Minute, time.Second); err != nil {
		b.Fatal(err)
	}
	const forShare = `SELECT r.id, d.scope, d.not_before, d.seq, clock_timestamp()
		FROM recordings r
		LEFT JOIN LATERAL (SELECT * FROM scope_deferrals s WHERE s.scope = $2 FOR SHARE) d ON true
		WHERE r.id = $1`
	run := func(b *testing.B, read func() error) {
		b.Helper()
		var next atomic.Int64
		b.SetParallelism((admissionReaders + 1) / 2) // × GOMAXPROCS goroutines
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				next.Add(1)
				if err := read(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(next.Load())/time.Since(start).Seconds(), "reads/s")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("RecordingWithScope", func(b *testing.B) {
		run(b, func() error {
			_, read, err := l.RecordingWithScope(ctx, id, scope)
			if err == nil && !read.Found {
				b.Error("the scope's row not found")
			}
			return err
		})
	})
	b.Run("RecordingAlone", func(b *testing.B) {
		run(b, func() error {
			_, err := l.Recording(ctx, id)
			return err
		})
	})
	b.Run("ForShareBefore00020", func(b *testing.B) {
		run(b, func() error {
			var rid, s any
			var nb, now time.Time
			var seq int64
			return big.QueryRow(ctx, forShare, id, scope).Scan(&rid, &s, &nb, &seq, &now)
		})
	})
}
