package pgsession_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/internal/pgsession"
	"github.com/callscribe/callscribe/internal/testdb"
)

// pools opens two pools on the test server: one as ApplyPool sets it up,
// and one with pgx's own encoding of uuid.UUID (Apply only).
func pools(t *testing.T) (applied, plain *pgxpool.Pool) {
	t.Helper()
	open := func(apply func(*pgxpool.Config)) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(testdb.ServerURL())
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 2
		apply(cfg)
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	applied = open(func(cfg *pgxpool.Config) { pgsession.ApplyPool(cfg, "callscribe uuid test") })
	plain = open(func(cfg *pgxpool.Config) { pgsession.Apply(cfg.ConnConfig, "callscribe uuid test") })
	return applied, plain
}

var drawUUID = rapid.Custom(func(t *rapid.T) uuid.UUID {
	var u uuid.UUID
	copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "bytes"))
	return u
})

// What a pool with ApplyPool sends for a uuid.UUID, a *uuid.UUID (nil or
// not), a []uuid.UUID (nil, empty or not) and a pgtype.UUID is what pgx
// sends on its own, in the extended protocol (binary) and the simple one
// (text): PostgreSQL reads the same value back, and it scans back to the
// value sent.
func TestApplyPoolSendsUUIDsAsPgxDoes(t *testing.T) {
	applied, plain := pools(t)
	ctx := context.Background()
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol}
	rapid.Check(t, func(rt *rapid.T) {
		mode := rapid.SampledFrom(modes).Draw(rt, "mode")
		var arg any
		switch rapid.IntRange(0, 4).Draw(rt, "kind") {
		case 0:
			arg = drawUUID.Draw(rt, "uuid")
		case 1:
			arg = (*uuid.UUID)(nil)
			if rapid.Bool().Draw(rt, "pointer set") {
				u := drawUUID.Draw(rt, "pointed")
				arg = &u
			}
		case 2:
			ids := rapid.SliceOfN(drawUUID, 0, 40).Draw(rt, "ids")
			if len(ids) == 0 && rapid.Bool().Draw(rt, "nil slice") {
				ids = nil
			}
			arg = ids
		case 3:
			arg = pgtype.UUID{Bytes: drawUUID.Draw(rt, "pgtype"), Valid: rapid.Bool().Draw(rt, "valid")}
		case 4:
			arg = []pgtype.UUID{{Bytes: drawUUID.Draw(rt, "pgtype elem"), Valid: true}}
		}
		cast := "uuid"
		switch arg.(type) {
		case []uuid.UUID, []pgtype.UUID:
			cast = "uuid[]"
		}
		q := fmt.Sprintf("SELECT $1::%s::text", cast)
		var got, want *string
		gotErr := applied.QueryRow(ctx, q, mode, arg).Scan(&got)
		wantErr := plain.QueryRow(ctx, q, mode, arg).Scan(&want)
		switch {
		case mode != pgx.QueryExecModeSimpleProtocol && (gotErr != nil || wantErr != nil):
			rt.Fatalf("%T %v, %v: ApplyPool: %v; pgx on its own: %v", arg, arg, mode, gotErr, wantErr)
		case (gotErr == nil) != (wantErr == nil):
			// pgx cannot send a slice in the simple protocol (it does not
			// know the array's type): neither can ApplyPool.
			rt.Fatalf("%T %v, %v: ApplyPool: %v; pgx on its own: %v", arg, arg, mode, gotErr, wantErr)
		case gotErr != nil:
			return
		}
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			rt.Fatalf("%T %v, %v: PostgreSQL read %s through ApplyPool, %s through pgx on its own", arg, arg, mode, show(got), show(want))
		}
		// And it scans back to what was sent.
		switch a := arg.(type) {
		case uuid.UUID:
			var back uuid.UUID
			if err := applied.QueryRow(ctx, "SELECT $1::uuid", mode, a).Scan(&back); err != nil || back != a {
				rt.Fatalf("uuid %v scanned back %v (%v)", a, back, err)
			}
		case []uuid.UUID:
			var back []uuid.UUID
			if err := applied.QueryRow(ctx, "SELECT $1::uuid[]", mode, a).Scan(&back); err != nil || !slices.Equal(back, a) || (a == nil) != (back == nil) {
				rt.Fatalf("ids %v scanned back %v (%v)", a, back, err)
			}
		}
	})
}

func show(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

// An AfterConnect the pool already had runs first, then ApplyPool's.
func TestApplyPoolKeepsAnEarlierAfterConnect(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(testdb.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		if registered(c) {
			order = append(order, "earlier hook after the codec")
		} else {
			order = append(order, "earlier hook")
		}
		return nil
	}
	pgsession.ApplyPool(cfg, "callscribe uuid test")
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if ok := registered(conn.Conn()); !ok || !slices.Equal(order, []string{"earlier hook"}) {
		t.Fatalf("hooks ran %v, codec registered %v; want the earlier hook first, then the codec", order, ok)
	}
}

// registered reports whether c's uuid type is ApplyPool's.
func registered(c *pgx.Conn) bool {
	dt, ok := c.TypeMap().TypeForOID(pgtype.UUIDOID)
	if !ok {
		return false
	}
	_, ok = dt.Codec.(pgxuuid.UUIDCodec)
	return ok
}

// BenchmarkUUIDEncode: pgx's own encoding of uuid.UUID, one and an ingest
// chunk's 1,000 in an array, against ApplyPool's.
func BenchmarkUUIDEncode(b *testing.B) {
	ids := make([]uuid.UUID, 1000)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	for _, c := range []struct {
		name     string
		register bool
	}{{"pgx", false}, {"ApplyPool", true}} {
		m := pgtype.NewMap()
		if c.register {
			pgxuuid.Register(m)
		}
		for _, v := range []struct {
			name string
			oid  uint32
			arg  any
		}{{"one", pgtype.UUIDOID, ids[0]}, {"array-1000", pgtype.UUIDArrayOID, ids}} {
			b.Run(c.name+"/"+v.name, func(b *testing.B) {
				b.ReportAllocs()
				var buf []byte
				for b.Loop() {
					var err error
					if buf, err = m.Encode(v.oid, pgtype.BinaryFormatCode, v.arg, buf[:0]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
