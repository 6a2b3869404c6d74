package jobs

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

func newRiverClient(pool *pgxpool.Pool, cfg *river.Config) (*river.Client[pgx.Tx], error) {
	return river.NewClient(riverpgxv5.New(pool), cfg)
}
