// Package pgsession sets the session parameters every connection of
// callscribe's pools carries: application_name, so that an operator tells
// its sessions apart in pg_stat_activity, and
// idle_in_transaction_session_timeout, so that the server enforces the
// design's rule that no transaction is held open across a network call: a
// session idle in a transaction for IdleInTransactionTimeout is ended by
// the server and its transaction rolled back.
package pgsession

import (
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// IdleInTransactionTimeout is how long a session may sit idle inside a
// transaction (waiting for its client, not running a statement) before
// the server ends it. Every transaction of callscribe sends its statements
// back to back, migrations included; a minute leaves room for a client
// descheduled on a loaded machine and still frees a forgotten
// transaction's locks quickly.
const IdleInTransactionTimeout = time.Minute

// Parameter names, as PostgreSQL spells them.
const (
	ApplicationName                 = "application_name"
	IdleInTransactionSessionTimeout = "idle_in_transaction_session_timeout"
)

// Apply sets cfg's application_name to name and its
// idle_in_transaction_session_timeout to IdleInTransactionTimeout, each
// unless cfg already has one (the database URL set it: the operator's
// choice wins).
func Apply(cfg *pgx.ConnConfig, name string) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.RuntimeParams[ApplicationName]; !ok {
		cfg.RuntimeParams[ApplicationName] = name
	}
	if _, ok := cfg.RuntimeParams[IdleInTransactionSessionTimeout]; !ok {
		cfg.RuntimeParams[IdleInTransactionSessionTimeout] = strconv.FormatInt(IdleInTransactionTimeout.Milliseconds(), 10)
	}
}
