package pgsession_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/internal/pgsession"
	"github.com/callscribe/callscribe/internal/testdb"
)

func TestApply(t *testing.T) {
	cfg, err := pgx.ParseConfig(testdb.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	pgsession.Apply(cfg, "callscribe probe")
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var app, idle string
	if err := conn.QueryRow(ctx, "SELECT current_setting('application_name'), current_setting('idle_in_transaction_session_timeout')").Scan(&app, &idle); err != nil {
		t.Fatal(err)
	}
	if app != "callscribe probe" || idle != "1min" {
		t.Fatalf("application_name %q, idle_in_transaction_session_timeout %q; want %q and 1min", app, idle, "callscribe probe")
	}
}

// A URL's own values win.
func TestApplyKeepsTheURLs(t *testing.T) {
	cfg, err := pgx.ParseConfig("postgres://u@127.0.0.1/db?application_name=ops&idle_in_transaction_session_timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	pgsession.Apply(cfg, "callscribe")
	if got := cfg.RuntimeParams[pgsession.ApplicationName]; got != "ops" {
		t.Errorf("application_name %q, want the URL's ops", got)
	}
	if got := cfg.RuntimeParams[pgsession.IdleInTransactionSessionTimeout]; got != "5s" {
		t.Errorf("idle_in_transaction_session_timeout %q, want the URL's 5s", got)
	}
}
