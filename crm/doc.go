// Package crm turns validated transcripts into CRM follow-ups. Today it
// holds transcript validation (Validate); action extraction and the CRM
// targets follow. It imports no sibling package: it takes plain values and
// speaks HTTP.
package crm
