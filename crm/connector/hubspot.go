package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/callscribe/callscribe/crm"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// hubspot upserts notes and tasks through the CRM v3 objects batch upsert.
type hubspot struct {
	ep     *endpoint
	zone   string
	loc    *time.Location
	idProp string
}

var hubspotPropertyPattern = apiNamePattern

func newHubSpot(cfg Config) (Target, error) {
	ep, err := cfg.endpointFor(KindHubSpot)
	if err != nil {
		return nil, err
	}
	h := &hubspot{ep: ep, zone: cfg.TimeZone, idProp: cfg.IDProperty}
	if h.loc, err = time.LoadLocation(h.zone); err != nil || h.zone == "Local" {
		return nil, fmt.Errorf("crm target: hubspot: Config.TimeZone %q is not an IANA time zone name", h.zone)
	}
	if !hubspotPropertyPattern.MatchString(h.idProp) {
		return nil, fmt.Errorf("crm target: hubspot: Config.IDProperty %q is not a property name", h.idProp)
	}
	return h, nil
}

// Name returns "hubspot".
func (h *hubspot) Name() string { return KindHubSpot }

// HubSpot's rate limit headers.
const (
	hubspotIntervalHeader = "X-HubSpot-RateLimit-Interval-Milliseconds"
	hubspotTaskNotStarted = "NOT_STARTED"
)

// hubspotGaugeHeaders maps the rate limit headers to gauges.
var hubspotGaugeHeaders = map[string]string{
	"X-HubSpot-RateLimit-Remaining":       "hubspot_ratelimit_remaining",
	"X-HubSpot-RateLimit-Max":             "hubspot_ratelimit_max",
	"X-HubSpot-RateLimit-Daily-Remaining": "hubspot_ratelimit_daily_remaining",
	"X-HubSpot-RateLimit-Daily":           "hubspot_ratelimit_daily",
}

// hubspotUpsertInput is one input of a batch upsert.
type hubspotUpsertInput struct {
	IDProperty string            `json:"idProperty"`
	ID         string            `json:"id"`
	Properties map[string]string `json:"properties"`
}

type hubspotUpsertBody struct {
	Inputs []hubspotUpsertInput `json:"inputs"`
}

// hubspotBatchResult is the body of 200 (and 207) from batch upsert.
type hubspotBatchResult struct {
	Status  string `json:"status"`
	Results []struct {
		ID         string            `json:"id"`
		New        *bool             `json:"new"`
		Properties map[string]string `json:"properties"`
	} `json:"results"`
	Errors []hubspotError `json:"errors"`
}

// hubspotError is HubSpot's error body (and an element of a 207's errors).
type hubspotError struct {
	Status        string `json:"status"`
	Message       string `json:"message"`
	CorrelationID string `json:"correlationId"`
	Category      string `json:"category"`
	ErrorType     string `json:"errorType"`
	PolicyName    string `json:"policyName"`
}

// text is the error's message with its category and correlation id, which
// HubSpot support asks for.
func (e hubspotError) text() string {
	msg := e.Message
	if e.Category != "" {
		msg = e.Category + ": " + msg
	}
	if e.CorrelationID != "" {
		msg += " (correlationId " + e.CorrelationID + ")"
	}
	return msg
}

// hubspotBatch is the actions of one object type, by index in the set.
type hubspotBatch struct {
	object  string // "notes" or "tasks"
	indexes []int
}

// Deliver upserts the call_note as a note and the other actions as tasks,
// with POST {BaseURL}/crm/v3/objects/notes/batch/upsert, then
// .../tasks/batch/upsert (when there are any), each input
// {"idProperty": IDProperty, "id": ExternalID(set, i), "properties": ...}:
//
//	note  hs_note_body (the text, HTML-escaped: HubSpot renders it as HTML),
//	      hs_timestamp (committed_at)
//	task  hs_task_subject, hs_task_body (HTML-escaped), hs_task_status NOT_STARTED,
//	      hs_timestamp: the due time (a date at midnight in Config.TimeZone,
//	      a pickup window's start)
//
// hs_timestamp is RFC 3339 UTC with milliseconds. The set is applied if any
// result is "new", else replayed; CRMID is the object ids in action order.
// Delivery stops at the first batch that is not a success (the notes
// upserted before stay; the retry upserts them again by the same ids).
// Errors:
//
//	207 (some inputs failed)              dead, partial_failure
//	400 / 401 / 403 / 404 / 409           dead: invalid_request / unauthorized / forbidden / not_found / conflict
//	429 TEN_SECONDLY_ROLLING, SECONDLY,   throttled, rate_limited, VendorDelay from
//	    or no policyName                  X-HubSpot-RateLimit-Interval-Milliseconds (the window)
//	429 DAILY                             throttled, daily_limit_exceeded, DeferUntil the next
//	                                      midnight in Config.TimeZone
//	503 with Retry-After / other 5xx      throttled, unavailable / transient, server_error
//
// A Retry-After, if HubSpot sends one, is reported raw too. The
// X-HubSpot-RateLimit-Remaining, -Max, -Daily and -Daily-Remaining headers
// become gauges (hubspot_ratelimit_remaining, ...).
func (h *hubspot) Deliver(ctx context.Context, d Delivery) (Result, error) {
	if err := checkDelivery(d); err != nil {
		return Result{}, err
	}
	set := d.Set
	batches := []hubspotBatch{{object: "notes"}, {object: "tasks"}}
	for i, a := range set.Actions {
		if a.Kind == crm.KindCallNote {
			batches[0].indexes = append(batches[0].indexes, i)
		} else {
			batches[1].indexes = append(batches[1].indexes, i)
		}
	}
	ids := make([]string, len(set.Actions))
	var (
		anyNew bool
		gauges map[string]float64
		last   int
	)
	for _, b := range batches {
		if len(b.indexes) == 0 {
			continue
		}
		body, err := json.Marshal(h.upsertBody(set, b))
		if err != nil {
			return Result{}, fmt.Errorf("crm target: hubspot: encoding the %s batch: %w", b.object, err)
		}
		rep, failed := h.ep.exchange(ctx, http.MethodPost, "/crm/v3/objects/"+b.object+"/batch/upsert", body, nil)
		var r *Result
		if failed != nil {
			r = failed
		} else {
			gauges = mergeGauges(gauges, hubspotGauges(rep.Header))
			last = rep.Status
			var isNew bool
			isNew, r = h.batch(rep, set, b, ids)
			if r == nil {
				anyNew = anyNew || isNew
				continue
			}
		}
		r.Message = truncateUTF8(b.object+" batch: "+r.Message, MessageMaxBytes)
		r.CRMID = joinIDs(ids)
		r.Gauges = gauges
		return *r, nil
	}
	r := Result{Outcome: OutcomeReplayed, Class: ClassReplayed, HTTPStatus: last, CRMID: joinIDs(ids), Gauges: gauges}
	if anyNew {
		r.Outcome, r.Class = OutcomeApplied, ClassApplied
	}
	return r, nil
}

// upsertBody maps the batch's actions to upsert inputs.
func (h *hubspot) upsertBody(set crm.ActionSet, b hubspotBatch) hubspotUpsertBody {
	in := make([]hubspotUpsertInput, 0, len(b.indexes))
	for _, i := range b.indexes {
		act := describe(set, i, h.loc)
		at := act.At.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		props := map[string]string{"hs_timestamp": at}
		if b.object == "notes" {
			props["hs_note_body"] = html.EscapeString(act.Body)
		} else {
			props["hs_task_subject"] = act.Subject
			props["hs_task_body"] = html.EscapeString(act.Body)
			props["hs_task_status"] = hubspotTaskNotStarted
		}
		in = append(in, hubspotUpsertInput{IDProperty: h.idProp, ID: ExternalID(set, i), Properties: props})
	}
	return hubspotUpsertBody{Inputs: in}
}

// batch reads the answer to one batch upsert into ids (by action index):
// whether any object was new, or the Result that stops the delivery.
func (h *hubspot) batch(rep vendorhttp.Reply, set crm.ActionSet, b hubspotBatch, ids []string) (bool, *Result) {
	switch rep.Status {
	case http.StatusOK, http.StatusCreated, http.StatusMultiStatus:
		var res hubspotBatchResult
		if err := json.Unmarshal(rep.Body, &res); err != nil {
			r := h.ep.badResponse(rep, "unparseable batch result: "+err.Error())
			return false, &r
		}
		anyNew := h.place(res, set, b, ids)
		if rep.Status == http.StatusMultiStatus || len(res.Errors) > 0 {
			msg := fmt.Sprintf("%d of %d inputs failed", len(res.Errors), len(b.indexes))
			if len(res.Errors) > 0 {
				msg += ": " + res.Errors[0].text()
			}
			r := h.ep.errorResult(rep, OutcomeDead, ClassPartialFailure, msg)
			return false, &r
		}
		if res.Status != "" && res.Status != "COMPLETE" {
			r := h.ep.badResponse(rep, fmt.Sprintf("batch status %q, want COMPLETE", res.Status))
			return false, &r
		}
		if len(res.Results) != len(b.indexes) {
			r := h.ep.badResponse(rep, fmt.Sprintf("%d results for %d inputs", len(res.Results), len(b.indexes)))
			return false, &r
		}
		return anyNew, nil
	}
	var e hubspotError
	msg := vendorhttp.PlainText(rep)
	if json.Unmarshal(rep.Body, &e) == nil && (e.Message != "" || e.Category != "" || e.PolicyName != "") {
		msg = e.text()
	}
	outcome, class := commonStatus(rep.Status, rep.Header)
	r := h.ep.errorResult(rep, outcome, class, msg)
	if rep.Status == http.StatusTooManyRequests {
		if e.PolicyName == "DAILY" {
			r.Class = ClassDailyLimitExceeded
			until := nextMidnight(h.ep.now(), h.loc)
			r.DeferUntil = &until
			r.DeferReason = "hubspot DAILY limit: resets at midnight " + h.zone
		} else {
			h.intervalDelay(&r, rep.Header)
		}
	}
	return false, &r
}

// place puts the results' ids at their actions' indexes: by the unique
// property when HubSpot echoes it (it does not promise result order),
// else in order into the places still empty. It reports whether any
// result was new.
func (h *hubspot) place(res hubspotBatchResult, set crm.ActionSet, b hubspotBatch, ids []string) bool {
	byKey := map[string]int{}
	for _, i := range b.indexes {
		byKey[ExternalID(set, i)] = i
	}
	anyNew := false
	var unplaced []string
	for _, r := range res.Results {
		if r.New != nil && *r.New {
			anyNew = true
		}
		if i, ok := byKey[r.Properties[h.idProp]]; ok && ids[i] == "" {
			ids[i] = r.ID
			continue
		}
		unplaced = append(unplaced, r.ID)
	}
	for _, i := range b.indexes {
		if len(unplaced) == 0 {
			break
		}
		if ids[i] == "" {
			ids[i], unplaced = unplaced[0], unplaced[1:]
		}
	}
	return anyNew
}

// intervalDelay reports the rolling window as the vendor delay.
func (h *hubspot) intervalDelay(r *Result, hd http.Header) {
	raw := vendorhttp.RawHeader(hd, hubspotIntervalHeader)
	if raw == nil {
		return
	}
	r.VendorDelayHeader, r.VendorDelayRaw = hubspotIntervalHeader, *raw
	ms, err := strconv.ParseFloat(strings.TrimSpace(*raw), 64)
	if err != nil || math.IsNaN(ms) || math.IsInf(ms, 0) || math.Abs(ms) > float64(math.MaxInt64/int64(time.Millisecond)) {
		return
	}
	d := time.Duration(ms * float64(time.Millisecond))
	r.VendorDelay = &d
}

// hubspotGauges reads the rate limit headers that parse as numbers; nil
// when none did.
func hubspotGauges(hd http.Header) map[string]float64 {
	var g map[string]float64
	for header, gauge := range hubspotGaugeHeaders {
		v, err := strconv.ParseUint(strings.TrimSpace(hd.Get(header)), 10, 64)
		if err != nil {
			continue
		}
		if g == nil {
			g = map[string]float64{}
		}
		g[gauge] = float64(v)
	}
	return g
}

// nextMidnight is the first midnight in loc after now.
func nextMidnight(now time.Time, loc *time.Location) time.Time {
	y, m, d := now.In(loc).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// joinIDs joins the ids known, in action order.
func joinIDs(ids []string) string {
	known := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" {
			known = append(known, id)
		}
	}
	return strings.Join(known, ",")
}
