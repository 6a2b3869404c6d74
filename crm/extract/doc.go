// Package extract is callscribe's English rule engine: RuleExtractor turns a
// validated transcript into the follow-ups of crm-webhook/v1 (a call note,
// promised rate sheets, pickup window changes, next-call dates), and
// ResolveDate reads the date phrases it relies on, in the tenant's zone.
//
// It is deterministic: no model, no network, the same actions for the same
// input and reference time on every run; the clock is injected. It
// implements crm.Extractor and returns crm.Action values; it does not
// validate transcripts (crm.Validate does) and it does not deliver actions
// (crm/connector does).
package extract
