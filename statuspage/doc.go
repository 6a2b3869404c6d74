// Package statuspage renders the operator's status page of `callscribe
// serve`: recordings by state and lane per tenant, active scope cooldowns,
// capacity per provider with a chart of per-minute peaks against the limit,
// the outbox's backlog and dead deliveries, and recent warnings.
//
// The page is server-rendered HTML (html/template) with its CSS and a small
// script inline: no external assets, so it works offline. The script
// fetches DataPath every few seconds and replaces the page's sections, so
// the page refreshes without a full reload.
//
// What it shows is a Snapshot, a plain struct: the package reads nothing
// itself, so it is tested without a database. Access is an admin's: a
// bearer token on each request, or a session cookie from signing in once
// at LoginPath (see Sessions). The checks themselves are the caller's
// (Config.IsAdmin, Config.SignIn, Config.StillValid).
package statuspage
