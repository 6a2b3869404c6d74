package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/internal/testdb"
)

// Every function the migrations create (River's excepted) runs with a
// pinned search_path, pg_catalog first and pg_temp last, so that no
// session's temporary tables shadow the tables its guards and the
// retention purge read. A migration that creates a function without
// `SET search_path = pg_catalog, <schema>, pg_temp` fails here.
func TestAttackEveryFunctionPinsSearchPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	rows, err := pool.Query(ctx, `
		SELECT p.oid::regprocedure::text, coalesce((SELECT c FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%'), '')
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = current_schema() AND p.proname NOT LIKE 'river\_%'
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var fn, setting string
		if err := rows.Scan(&fn, &setting); err != nil {
			t.Fatal(err)
		}
		n++
		path := strings.TrimPrefix(setting, "search_path=")
		if setting == "" || !strings.HasPrefix(path, "pg_catalog,") || !strings.HasSuffix(path, ", pg_temp") {
			t.Errorf("function %s: search_path setting %q, want pg_catalog, <schema>, pg_temp", fn, setting)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("found %d functions in the schema; the query is wrong", n)
	}
}
