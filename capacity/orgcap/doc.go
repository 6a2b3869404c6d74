// Package orgcap keeps the organisation and campaign call caps that an
// operator sets at run time (`callscribe orgs set`, `campaigns set`, the
// admin routes of `callscribe serve`) in PostgreSQL, and feeds them to the
// capacity.Slots of every process without a restart.
//
// Store: an organisation's stored cap is 1–capacity.OrgLimitMax, a
// campaign's 1–capacity.CampaignLimitMax and never above its
// organisation's stored cap, which it needs first. A change that would put
// a campaign above its organisation (a campaign raised above it, or the
// organisation lowered below one of its campaigns) is refused with an
// *InvalidError naming the field; the database's triggers refuse it too,
// under a lock of the organisation's row, so two changes at once cannot
// break the rule. Every change is recorded with who made it, when, the cap
// before and after and why (Change); the trail is append-only and caps are
// changed, never deleted.
//
// Reloader: re-reads every stored cap every ReloaderConfig.Every (2s by
// default) in the background and hands the table to Slots.SetStoredCaps,
// which swaps it atomically; stored caps override the configured ones
// entry by entry. Acquiring a call slot never waits on PostgreSQL: when
// the database cannot be read, the last caps read stand and a warning is
// logged at most once a minute.
//
// What it does not do: it does not count calls (capacity.Slots does, in
// Redis), and it checks no token: its callers say who makes a change.
package orgcap
