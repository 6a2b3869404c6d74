package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// salesforce upserts one record per action through the REST API's
// sObject Rows by External ID resource.
type salesforce struct {
	ep      *endpoint
	version string
	sobject string
	field   string
}

func newSalesforce(cfg Config) (Target, error) {
	ep, err := cfg.endpointFor(KindSalesforce)
	if err != nil {
		return nil, err
	}
	s := &salesforce{ep: ep, version: cfg.APIVersion, sobject: cfg.SObject, field: cfg.ExternalIDField}
	switch {
	case !apiVersionPattern.MatchString(s.version):
		return nil, fmt.Errorf("crm target: salesforce: Config.APIVersion %q must look like v59.0", s.version)
	case !apiNamePattern.MatchString(s.sobject):
		return nil, fmt.Errorf("crm target: salesforce: Config.SObject %q is not an API name", s.sobject)
	case !apiNamePattern.MatchString(s.field):
		return nil, fmt.Errorf("crm target: salesforce: Config.ExternalIDField %q is not an API name", s.field)
	}
	return s, nil
}

// Name returns "salesforce".
func (s *salesforce) Name() string { return KindSalesforce }

// descriptionMaxRunes is the longest Description: Salesforce Task.Description
// holds 32,000 characters.
const descriptionMaxRunes = 32000

// salesforceRecord is the upsert body: the Task fields the mapping writes.
// The external ID field is in the URL and must not be in the body.
type salesforceRecord struct {
	Subject      string `json:"Subject"`
	Description  string `json:"Description"`
	ActivityDate string `json:"ActivityDate"`
}

// salesforceUpsert is the body of 200 and 201 (created from API 46.0).
type salesforceUpsert struct {
	ID      *string         `json:"id"`
	Success *bool           `json:"success"`
	Errors  json.RawMessage `json:"errors"`
	Created *bool           `json:"created"`
}

// salesforceError is one element of an error body: an array of these, or
// (for some 404s) a single one.
type salesforceError struct {
	Message   string   `json:"message"`
	ErrorCode string   `json:"errorCode"`
	Fields    []string `json:"fields"`
}

// Deliver upserts each action, in order, with
// PATCH {BaseURL}/services/data/{APIVersion}/sobjects/{SObject}/{ExternalIDField}/{ExternalID(set, i)}.
//
// Mapping (describe): Subject is a one-line title ("Call summary: call
// call-42", "Send rate sheet: Chicago to Dallas", "Pickup window change:
// PO-5512", "Next call on 2026-12-04"), at most 255 characters;
// Description is the note's text, or a sentence with the lanes, the window
// or the date and the call id, at most 32,000 characters; ActivityDate is
// the due date, the next-call date, the window's local start date, or
// (call_note) the UTC date of committed_at. Status, Priority and OwnerId
// are left to the org's defaults.
//
// Per record: 201 created; 200 (API 46.0 and later: "created" says which)
// or 204 (before 46.0) updated. The set is applied if any record was
// created, else replayed. Delivery stops at the first record that is not
// a success and reports it (Message starts "record i of n"); records
// upserted before it stay, and the retry upserts them again by the same
// external ids, which changes nothing. Errors:
//
//	300 (external id matches several records)  dead, multiple_matches
//	400 DUPLICATE_VALUE                        transient, duplicate_value (a concurrent upsert created it: the retry updates)
//	400 / 404                                  dead, invalid_request / not_found
//	401                                        dead, unauthorized (an expired token is not refreshed here)
//	403 REQUEST_LIMIT_EXCEEDED                 throttled, request_limit_exceeded (no Retry-After: the fallback backoff applies)
//	403 otherwise                              dead, forbidden
//	503 with Retry-After / other 5xx           throttled, unavailable / transient, server_error
//
// Sforce-Limit-Info (api-usage=25/15000) becomes the gauges
// salesforce_api_usage and salesforce_api_limit (per-app-api-usage:
// salesforce_per_app_api_usage and salesforce_per_app_api_limit), from the
// last answer that had it.
//
// A set committed again under the same key with another content is
// upserted over the old records: Salesforce has no notion of a reused
// key.
func (s *salesforce) Deliver(ctx context.Context, d Delivery) (Result, error) {
	if err := checkDelivery(d); err != nil {
		return Result{}, err
	}
	set := d.Set
	n := len(set.Actions)
	var (
		ids     []string
		created bool
		gauges  map[string]float64
		last    int
	)
	for i := range set.Actions {
		act := describe(set, i, time.UTC)
		body, err := json.Marshal(salesforceRecord{
			Subject:      act.Subject,
			Description:  truncateRunes(act.Body, descriptionMaxRunes),
			ActivityDate: act.Date,
		})
		if err != nil {
			return Result{}, fmt.Errorf("crm target: salesforce: encoding record %d: %w", i, err)
		}
		path := "/services/data/" + s.version + "/sobjects/" + s.sobject + "/" + s.field + "/" + url.PathEscape(ExternalID(set, i))
		rep, failed := s.ep.exchange(ctx, http.MethodPatch, path, body, nil)
		var r *Result
		if failed != nil {
			r = failed
		} else {
			gauges = mergeGauges(gauges, salesforceGauges(rep.Header))
			last = rep.Status
			var id string
			var isNew bool
			id, isNew, r = s.record(rep)
			if r == nil {
				created = created || isNew
				if id != "" {
					ids = append(ids, id)
				}
				continue
			}
		}
		r.Message = truncateUTF8(fmt.Sprintf("record %d of %d: %s", i+1, n, r.Message), MessageMaxBytes)
		r.CRMID = strings.Join(ids, ",")
		r.Gauges = gauges
		return *r, nil
	}
	r := Result{Outcome: OutcomeReplayed, Class: ClassReplayed, HTTPStatus: last, CRMID: strings.Join(ids, ","), Gauges: gauges}
	if created {
		r.Outcome, r.Class = OutcomeApplied, ClassApplied
	}
	return r, nil
}

// record reads the answer to one upsert: the record id and whether it
// was created, or the Result that stops the delivery.
func (s *salesforce) record(rep vendorhttp.Reply) (id string, created bool, stop *Result) {
	switch rep.Status {
	case http.StatusCreated, http.StatusOK:
		var u salesforceUpsert
		if err := json.Unmarshal(rep.Body, &u); err != nil {
			r := s.ep.badResponse(rep, "unparseable upsert result: "+err.Error())
			return "", false, &r
		}
		if u.ID == nil || *u.ID == "" || (u.Success != nil && !*u.Success) {
			r := s.ep.badResponse(rep, "upsert result without an id or without success")
			return "", false, &r
		}
		created = rep.Status == http.StatusCreated
		if u.Created != nil {
			created = *u.Created
		}
		return *u.ID, created, nil
	case http.StatusNoContent:
		return "", false, nil
	case http.StatusMultipleChoices:
		var matches []string
		msg := "the external id matches several records"
		if json.Unmarshal(rep.Body, &matches) == nil && len(matches) > 0 {
			msg += ": " + strings.Join(matches, ", ")
		}
		r := s.ep.errorResult(rep, OutcomeDead, ClassMultipleMatches, msg)
		return "", false, &r
	}
	e := salesforceFirstError(rep.Body)
	msg := vendorhttp.PlainText(rep)
	if e.ErrorCode != "" || e.Message != "" {
		msg = strings.TrimPrefix(e.ErrorCode+": "+e.Message, ": ")
	}
	outcome, class := commonStatus(rep.Status, rep.Header)
	switch {
	case rep.Status == http.StatusForbidden && e.ErrorCode == "REQUEST_LIMIT_EXCEEDED":
		outcome, class = OutcomeThrottled, ClassRequestLimitExceeded
	case rep.Status == http.StatusBadRequest && e.ErrorCode == "DUPLICATE_VALUE":
		outcome, class = OutcomeTransient, ClassDuplicateValue
	}
	r := s.ep.errorResult(rep, outcome, class, msg)
	return "", false, &r
}

// salesforceFirstError reads the first error of an error body, an array
// or a single object; the zero value if neither.
func salesforceFirstError(body []byte) salesforceError {
	var list []salesforceError
	if json.Unmarshal(body, &list) == nil && len(list) > 0 {
		return list[0]
	}
	var one salesforceError
	_ = json.Unmarshal(body, &one)
	return one
}

// salesforceGauges reads Sforce-Limit-Info: "api-usage=25/15000", possibly
// with further comma-separated entries such as
// "per-app-api-usage=17/250(appName=sample-app)". Unknown entries and
// values that do not parse are skipped; nil when nothing was read.
func salesforceGauges(h http.Header) map[string]float64 {
	names := map[string]string{"api-usage": "salesforce_api", "per-app-api-usage": "salesforce_per_app_api"}
	var g map[string]float64
	for _, field := range h.Values("Sforce-Limit-Info") {
		for _, entry := range strings.Split(field, ",") {
			key, value, ok := strings.Cut(strings.TrimSpace(entry), "=")
			prefix, known := names[key]
			if !ok || !known {
				continue
			}
			if i := strings.IndexByte(value, '('); i >= 0 {
				value = value[:i]
			}
			used, limit, ok := strings.Cut(strings.TrimSpace(value), "/")
			u, err1 := strconv.ParseUint(strings.TrimSpace(used), 10, 64)
			l, err2 := strconv.ParseUint(strings.TrimSpace(limit), 10, 64)
			if !ok || err1 != nil || err2 != nil {
				continue
			}
			if g == nil {
				g = map[string]float64{}
			}
			g[prefix+"_usage"], g[prefix+"_limit"] = float64(u), float64(l)
		}
	}
	return g
}

// mergeGauges adds the later gauges to the earlier ones.
func mergeGauges(into, later map[string]float64) map[string]float64 {
	if len(later) == 0 {
		return into
	}
	if into == nil {
		into = map[string]float64{}
	}
	for k, v := range later {
		into[k] = v
	}
	return into
}
