package ledger

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed queries.sql
var queriesSQL string

// queries maps each "-- name: X" in queries.sql to its SQL.
var queries = parseQueries(queriesSQL)

func parseQueries(src string) map[string]string {
	out := map[string]string{}
	name := ""
	var b strings.Builder
	flush := func() {
		if name != "" {
			out[name] = strings.TrimSpace(b.String())
		}
		b.Reset()
	}
	for line := range strings.SplitSeq(src, "\n") {
		if n, ok := strings.CutPrefix(line, "-- name: "); ok {
			flush()
			name = strings.TrimSpace(n)
			continue
		}
		if name != "" && !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	flush()
	return out
}

// q returns the named query; a missing name is a programming error.
func q(name string) string {
	s, ok := queries[name]
	if !ok {
		panic(fmt.Sprintf("ledger: no query named %q in queries.sql", name))
	}
	return s
}
