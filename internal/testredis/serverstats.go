package testredis

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ServerStats is what a Redis server's INFO says of the scripts it ran and
// the CPU it used since it started.
type ServerStats struct {
	// Scripts is its EVAL and EVALSHA calls; ScriptMicros the time it
	// spent in them, in µs.
	Scripts, ScriptMicros float64
	// CPU is its CPU seconds, user and system.
	CPU float64
}

// Stats reads rdb's server's ServerStats (INFO commandstats and cpu),
// failing tb when Redis does not answer.
func Stats(tb testing.TB, rdb redis.UniversalClient) ServerStats {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats", "cpu").Result()
	if err != nil {
		tb.Fatalf("reading Redis INFO: %v", err)
	}
	var s ServerStats
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "cmdstat_eval", "cmdstat_evalsha":
			for f := range strings.SplitSeq(rest, ",") {
				k, v, _ := strings.Cut(f, "=")
				n, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					s.Scripts += n
				case "usec":
					s.ScriptMicros += n
				}
			}
		case "used_cpu_sys", "used_cpu_user":
			v, _ := strconv.ParseFloat(rest, 64)
			s.CPU += v
		}
	}
	return s
}
