// Package crm holds the follow-up actions callscribe sends to CRMs and the
// checks a transcript passes before they are made: Validate checks a
// transcript against a tenant's rules, Action and ActionSet are the
// follow-ups of crm-webhook/v1, and Extractor is what turns a transcript
// into them.
//
// Its subpackages do the work: extract is the rule-based Extractor (English
// phrasing, dates resolved in the tenant's zone), connector delivers action
// sets to webhook, Salesforce and HubSpot CRMs, and crmsim is a CRM
// simulator for tests and the demo. It imports no sibling package: it takes
// plain values and speaks HTTP.
package crm
