// Package devservice provides real, throwaway PostgreSQL and Redis servers for
// a first run (`callscribe demo`) and for the test command (`make test`), and
// decides when to reuse servers that already run instead.
//
// # Throwaway servers
//
// StartPostgres runs initdb into a fresh directory under os.TempDir and starts
// postgres on it as a child process: no TCP port (only a unix socket inside
// that directory, so it never clashes with a system server on 5432), fsync and
// synchronous commit off, max_connections 200. StartRedisServer does the same
// for redis-server: a unix socket only, no RDB or AOF persistence.
// StartMiniredis runs the in-process github.com/alicebob/miniredis instead,
// for when no redis-server is installed and Redis semantics need not be exact.
//
// Guarantees:
//
//   - A server runs in its own process group, so a Ctrl-C in the terminal
//     reaches only this process, which then stops the server in order.
//   - On Linux the kernel SIGKILLs a server if this process dies without
//     calling Stop (parent-death signal). Its temporary directory is then
//     left behind in os.TempDir, named callscribe-pg-* or callscribe-redis-*.
//   - Stop is idempotent: a graceful shutdown (SIGINT, PostgreSQL's fast
//     shutdown; SIGTERM for redis-server), SIGKILL of the whole process group
//     after a timeout, then removal of the directory.
//   - Postgres.Restart stops PostgreSQL the same way but keeps the directory,
//     optionally leaves it down a while, then starts it again on the same
//     cluster and socket: committed data and the URL stay, every connection
//     is cut. Tests use it to show that
//     clients survive a database restart.
//   - A failed start leaves nothing running and nothing on disk, and its
//     error quotes the tail of the server's output.
//   - Run as root, PostgreSQL (which refuses root) runs as an unprivileged
//     account, "postgres" by default, that owns the temporary directory.
//
// # Test environment
//
// ResolveTestEnv picks the servers for `make test`: for each of PostgreSQL
// (TEST_DATABASE_URL) and Redis (TEST_REDIS_URL) it reuses the server at the
// URL when one answers within 2s; fails when a URL a person set explicitly
// does not answer; otherwise starts a throwaway server from installed
// binaries; failing that, installs them with apt-get when allowed and
// possible (root, Debian/Ubuntu); and otherwise fails with the command that
// would install them. It also looks for Chromium (the status page's browser
// test) and, when allowed and possible, installs Debian's chromium; without
// it, it says what to install and goes on. StartHogs starts the CPU hogs of
// `make test-load`.
//
// # What it does not do
//
// It is not for production: data is thrown away and durability is off. It
// creates no application schema (run the migrations against the URL), does
// not share one throwaway server between processes, and never stops or
// changes a server it did not start. Throwaway servers need Linux or macOS.
package devservice
