// Package status renders the operator's status page of `callscribe
// serve`: recordings by state and lane per tenant, active scope cooldowns,
// capacity per provider with a chart of per-minute peaks against the limit,
// the outbox's backlog and dead deliveries, the replay runs still active
// with their figures, and recent warnings.
//
// The page is server-rendered HTML (html/template) with its CSS and a small
// script inline: no external assets, so it works offline. The script
// fetches DataPath every few seconds and replaces the page's sections, so
// the page refreshes without a full reload.
//
// What it shows is a Snapshot, a plain struct: the package reads none of
// it itself. Access is an admin's: a bearer token on each request, or a
// session cookie from signing in once at LoginPath. The checks of a token
// are the caller's (Config.IsAdmin, Config.SignIn, Config.StillValid).
//
// Sessions (see Sessions) are kept in PostgreSQL, table
// statuspage_sessions: the cookie holds a random 32-byte session id, the
// table its SHA-256 with the admin token's id and the expiry (12 h). So
// every serve process behind a load balancer knows every session, a
// restart signs no one out, and signing out at LogoutPath deletes the
// row: a copy of the cookie is refused from then on, everywhere. The
// token is looked up on every request too, so revoking it ends its
// sessions. Expired rows are deleted at each sign-in (by the database's
// clock), which bounds the table by the sign-ins of one session lifetime.
// The runtime role reads and inserts rows and deletes them only through
// two functions (one session by its hash; the expired ones).
//
// The cookie is HttpOnly and SameSite=Strict; it is Secure per
// Config.SecureCookies: SecureAuto when the request reached the process
// over TLS (forwarded headers are not trusted), SecureAlways behind a
// proxy that ends TLS, SecureNever. A request other than GET and HEAD
// (sign-in, sign-out) is refused with 403 when its Origin, if sent, is not
// the page's own (scheme://host of the request; https when it came over
// TLS or with SecureAlways), or its Sec-Fetch-Site, if sent, is neither
// same-origin nor none. Without either header (curl) it is allowed.
package status
