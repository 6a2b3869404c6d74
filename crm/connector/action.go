package connector

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/callscribe/callscribe/crm"
)

// dateLayout is the protocol's date, YYYY-MM-DD.
const dateLayout = time.DateOnly

// checkDelivery refuses a Delivery that no target may send: see
// ErrInvalidDelivery.
func checkDelivery(d Delivery) error {
	if d.Attempt < 1 {
		return fmt.Errorf("%w: Attempt is %d, want 1 or more", ErrInvalidDelivery, d.Attempt)
	}
	s := d.Set
	switch {
	case s.TenantID == "":
		return fmt.Errorf("%w: the action set has no tenant_id", ErrInvalidDelivery)
	case s.CallID == "":
		return fmt.Errorf("%w: the action set has no call_id", ErrInvalidDelivery)
	case s.ActionVersion < 1:
		return fmt.Errorf("%w: action_version is %d, want 1 or more", ErrInvalidDelivery, s.ActionVersion)
	case s.CommittedAt.IsZero():
		return fmt.Errorf("%w: the action set has no committed_at", ErrInvalidDelivery)
	case len(s.Actions) == 0:
		return fmt.Errorf("%w: the action set has no actions", ErrInvalidDelivery)
	}
	notes := 0
	for i, a := range s.Actions {
		if err := checkAction(a); err != nil {
			return fmt.Errorf("%w: actions[%d] (%s): %w", ErrInvalidDelivery, i, a.Kind, err)
		}
		if a.Kind == crm.KindCallNote {
			notes++
		}
	}
	if notes != 1 {
		return fmt.Errorf("%w: the action set holds %d call_note actions, want exactly 1", ErrInvalidDelivery, notes)
	}
	return nil
}

// checkAction checks the fields of one action's kind.
func checkAction(a crm.Action) error {
	switch a.Kind {
	case crm.KindCallNote:
		return nil
	case crm.KindRateSheetPromised:
		// Lanes are optional ("I'll send you the rates by Friday"): the
		// extractor records the promise without them, and crm-webhook/v1
		// does not require them.
		return checkDate("due", a.Due)
	case crm.KindPickupWindowChange:
		switch {
		case a.ShipmentRef == "":
			return errors.New("no shipment_ref")
		case a.Window == nil || a.Window.Start.IsZero() || a.Window.End.IsZero():
			return errors.New("no window")
		case a.Window.End.Before(a.Window.Start):
			return errors.New("the window ends before it starts")
		}
		return nil
	case crm.KindNextCall:
		return checkDate("date", a.Date)
	}
	return errors.New("unknown kind")
}

func checkDate(field, v string) error {
	if _, err := time.Parse(dateLayout, v); err != nil || len(v) != len(dateLayout) {
		return fmt.Errorf("%s %q is not YYYY-MM-DD", field, v)
	}
	return nil
}

// ExternalIDMaxLen is the longest external id: Salesforce's limit for a
// text external ID field.
const ExternalIDMaxLen = 255

// ExternalID returns the stable id of action i of set s in a CRM that
// upserts by a unique field of its own (Salesforce's external ID field,
// HubSpot's unique property). It is the same for every attempt, every
// replay and every process, and different for every (tenant, call,
// version, index).
//
// It reads "<tenant_id>:<call_id>:<action_version>:<i>" when tenant and
// call consist of lower-case letters, digits, '-', '_' and '.', and the
// whole fits ExternalIDMaxLen. Otherwise it is "cs1_" followed by the hex
// SHA-256 of the four values, length-prefixed: Salesforce matches external
// ids case-insensitively by default ("T1" and "t1" would be one record), a
// ':' inside a tenant or call id would make the readable form ambiguous,
// and ids over 255 characters do not fit. The two forms never meet: the
// readable one always contains ':' and the hashed one never does.
func ExternalID(s crm.ActionSet, i int) string {
	readable := s.TenantID + ":" + s.CallID + ":" + strconv.Itoa(s.ActionVersion) + ":" + strconv.Itoa(i)
	if plainIDPart(s.TenantID) && plainIDPart(s.CallID) && len(readable) <= ExternalIDMaxLen {
		return readable
	}
	h := sha256.New()
	for _, part := range []string{s.TenantID, s.CallID} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		_, _ = h.Write(n[:])
		_, _ = h.Write([]byte(part))
	}
	var nums [16]byte
	binary.BigEndian.PutUint64(nums[:8], uint64(int64(s.ActionVersion)))
	binary.BigEndian.PutUint64(nums[8:], uint64(int64(i)))
	_, _ = h.Write(nums[:])
	return "cs1_" + hex.EncodeToString(h.Sum(nil))
}

// plainIDPart reports whether s can stand in a readable external id.
func plainIDPart(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// activity is an action as a CRM activity (a Salesforce Task, a HubSpot
// note or task).
type activity struct {
	Subject string
	Body    string
	// Date is the calendar date the activity is due or happened on,
	// YYYY-MM-DD.
	Date string
	// At is the instant HubSpot stores as hs_timestamp: when the note was
	// taken, when the task is due.
	At time.Time
}

// subjectMaxRunes is the longest Subject: Salesforce Task.Subject holds 255
// characters.
const subjectMaxRunes = 255

// describe maps action i of s to an activity. Dates without a time (a due
// date, a next-call date) become At at midnight in loc, so that the CRM
// shows the same calendar date.
func describe(s crm.ActionSet, i int, loc *time.Location) activity {
	a := s.Actions[i]
	var act activity
	switch a.Kind {
	case crm.KindCallNote:
		act = activity{
			Subject: "Call summary: call " + s.CallID,
			Body:    a.Text,
			Date:    s.CommittedAt.UTC().Format(dateLayout),
			At:      s.CommittedAt,
		}
	case crm.KindRateSheetPromised:
		lanes := strings.Join(a.Lanes, "; ")
		act = activity{
			Subject: "Send rate sheet: " + lanes,
			Body:    fmt.Sprintf("Rate sheet promised on call %s for %s, due %s.", s.CallID, lanes, a.Due),
			Date:    a.Due,
			At:      midnight(a.Due, loc),
		}
	case crm.KindPickupWindowChange:
		w := a.Window
		act = activity{
			Subject: "Pickup window change: " + a.ShipmentRef,
			Body: fmt.Sprintf("New pickup window for %s: %s to %s (call %s).", a.ShipmentRef,
				w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339), s.CallID),
			Date: w.Start.Format(dateLayout), // in the window's own zone: the local pickup day
			At:   w.Start,
		}
	case crm.KindNextCall:
		act = activity{
			Subject: "Next call on " + a.Date,
			Body:    fmt.Sprintf("Next call agreed on call %s for %s.", s.CallID, a.Date),
			Date:    a.Date,
			At:      midnight(a.Date, loc),
		}
	}
	act.Subject = truncateRunes(act.Subject, subjectMaxRunes)
	return act
}

// midnight is the start of the date in loc. The date was checked.
func midnight(date string, loc *time.Location) time.Time {
	t, _ := time.ParseInLocation(dateLayout, date, loc)
	return t
}
