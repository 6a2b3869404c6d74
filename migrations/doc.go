// Package migrations holds callscribe's numbered SQL migrations, embedded in
// the binary, and the Migrator that applies them together with River's own
// tables (through rivermigrate).
//
// Guarantees:
//   - Up and Down are idempotent: with nothing pending they change nothing.
//   - Two processes migrating at once are serialised by one PostgreSQL
//     advisory lock (LockKey); the second finds nothing left to do.
//   - Every migration has a tested down path.
//
// It does not create the database itself; the URL must name an existing one.
package migrations
