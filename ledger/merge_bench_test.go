//go:build linux

package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger/internal/dbsqlc"
)

// mergeBenchGroups are how many moves one group of BenchmarkMergedMoves
// holds: what a busy worker's group commit gathers of one kind.
var mergeBenchGroups = []int{2, 4, 6, 8}

// BenchmarkMergedMoves measures a group's moves of recordings (eligible →
// submitted, Transition's statement) written in one transaction on one
// connection: each its own one-row statement in the group's batch (the
// baseline: the group commit before Queue.Merged), and all in one merged
// statement (RecordingTransitionMany). Per move: the time (one
// connection, so the client's and the database's work one after the
// other, and the group's commit), the CPU of the connection's PostgreSQL
// backend (/proc/PID/stat) and of this process (getrusage), which the
// machine's other load does not change.
//
//	go run ./internal/cmd/testenv -- go test -run '^$' -bench MergedMoves -benchtime 400x ./ledger/
func BenchmarkMergedMoves(b *testing.B) {
	for _, group := range mergeBenchGroups {
		for _, merged := range []bool{false, true} {
			name := "one-row statements"
			if merged {
				name = "merged"
			}
			b.Run(fmt.Sprintf("%s/%d", name, group), func(b *testing.B) { benchMergedMoves(b, group, merged) })
		}
	}
}

// benchMergedMoves is BenchmarkMergedMoves for groups of size moves,
// merged or as one-row statements.
func benchMergedMoves(b *testing.B, size int, merged bool) {
	ctx := context.Background()
	l, err := New(testdb.New(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	ids := benchEligible(b, l, b.N*size)
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	pg0, self0 := processCPU(b, backend), selfCPU(b)
	b.ResetTimer()
	for i := range b.N {
		group := ids[i*size : (i+1)*size]
		qs, idx := make([]QueueFunc, len(group)), make([]int, len(group))
		for k, id := range group {
			p, err := l.transitionParams(Transition{RecordingID: id.id, From: StateEligible, To: StateSubmitted, Reason: "submitted",
				Provider: new("generic-http")})
			if err != nil {
				b.Fatal(err)
			}
			idx[k] = k
			qs[k] = func(q *Queue) FinishFunc {
				var qerr error
				fn := func(_ dbsqlc.RecordingTransitionRow, err error) { qerr = err }
				if merged {
					// Merged from two, whatever MergeMin says.
					queueMerged(q, transitionMergeKey{}, p.ID, p, fn, dbsqlc.QueueRecordingTransition, dbsqlc.QueueRecordingTransitionMany, 2)
				} else {
					dbsqlc.QueueRecordingTransition(q.Batch, p, fn)
				}
				return func(context.Context, pgx.Tx, error) error { return qerr }
			}
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			return runQueued(ctx, tx, &queueRun{}, qs, idx, false, func(_ int, err error) bool { return err == nil })
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	moves := float64(b.N * size)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/moves, "ns/move")
	b.ReportMetric(float64((processCPU(b, backend)-pg0).Microseconds())/moves, "pg-cpu-µs/move")
	b.ReportMetric(float64((selfCPU(b)-self0).Microseconds())/moves, "client-cpu-µs/move")
	b.ReportMetric(0, "ns/op")
}

type benchRecordingID struct{ id uuid.UUID }

// benchEligible ingests n recordings, born eligible, in chunks of 1,000.
func benchEligible(b *testing.B, l *Ledger, n int) []benchRecordingID {
	b.Helper()
	ctx := context.Background()
	var out []benchRecordingID
	for lo := 0; lo < n; lo += 1000 {
		var ns []NewRecording
		for i := lo; i < min(lo+1000, n); i++ {
			h := sha256.Sum256(fmt.Appendf(nil, "%s-%d", b.Name(), i))
			ns = append(ns, NewRecording{TenantID: "acme", CallID: fmt.Sprintf("call-%d", i), AudioSHA256: hex.EncodeToString(h[:]),
				Lane: LaneBatch, AudioURI: "acme/a.wav", AudioBytes: 1024})
		}
		err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
			res, err := l.IngestManyTx(ctx, tx, ns, IngestManyOptions{})
			for _, r := range res {
				if r.Err != nil {
					return r.Err
				}
				out = append(out, benchRecordingID{r.Recording.ID})
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// processCPU is process pid's CPU time so far (user and system, from
// /proc/PID/stat, in clock ticks of 10 ms).
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("reading the PostgreSQL backend's CPU time (the server must run on this machine): %v", err)
	}
	// The fields after the command's name, which is in parentheses.
	_, rest, _ := strings.Cut(string(raw), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// selfCPU is this process's CPU time so far (user and system).
func selfCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
