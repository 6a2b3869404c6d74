// Package crm turns validated transcripts into CRM follow-ups: Validate
// checks a transcript against a tenant's rules, RuleExtractor turns it into
// an action set (a call note, promised rate sheets, pickup window changes,
// next-call dates, relative dates resolved in the tenant's zone), and the
// subpackage target delivers action sets to webhook, Salesforce and HubSpot
// CRMs. It imports no sibling package: it takes plain values and speaks HTTP.
package crm
