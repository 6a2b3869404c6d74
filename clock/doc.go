// Package clock is callscribe's one source of the current time: the Clock
// interface that every package needing time takes (a Config field named
// Clock), the real clock (System) and a settable clock for tests (Stub).
//
// It is a public leaf at the top of the module, importing nothing but the
// standard library, for two reasons. The public configurations of ledger,
// capacity, crm, outbox and jobs name its type, so a program outside this
// module (a live-call runtime using capacity, say) must be able to import it
// and use Stub in its own tests; a package under internal/ could be
// satisfied but not named. And ledger, capacity and crm import no sibling
// domain package: a clock owned by one of them would make the others
// depend on it. River does the same with rivertype.TimeGenerator.
//
// What it guarantees: System keeps the monotonic reading of time.Now, so
// durations measured between two readings are immune to wall-clock steps,
// and it returns the local zone, as time.Now does. What it does not do:
// normalise to UTC. The packages that store or print a time do that at
// their boundary (ledger and outbox before every read from and write to
// PostgreSQL; the simulators when they stamp an answer).
package clock
