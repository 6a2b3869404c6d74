package crmsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/connector"
)

// genSet draws a valid action set.
func genSet(t *rapid.T) crm.ActionSet {
	date := func(label string) string {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, rapid.IntRange(0, 3650).Draw(t, label)).Format(time.DateOnly)
	}
	s := crm.ActionSet{
		TenantID:        rapid.StringN(1, 12, -1).Draw(t, "tenant"),
		CallID:          rapid.StringN(1, 12, -1).Draw(t, "call"),
		ActionVersion:   rapid.IntRange(1, 1<<30).Draw(t, "version"),
		RecordingSHA256: rapid.StringMatching(`[0-9a-f]{64}`).Draw(t, "sha"),
		CommittedAt:     time.Unix(rapid.Int64Range(0, 4e9).Draw(t, "committed"), 0).UTC(),
		Actions:         []crm.Action{{Kind: crm.KindCallNote, Text: rapid.String().Draw(t, "text")}},
	}
	for range rapid.IntRange(0, 4).Draw(t, "others") {
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			s.Actions = append(s.Actions, crm.Action{Kind: crm.KindRateSheetPromised, Lanes: rapid.SliceOfN(rapid.String(), 1, 3).Draw(t, "lanes"), Due: date("due")})
		case 1:
			z := time.FixedZone("", rapid.IntRange(-12, 14).Draw(t, "zone")*3600)
			start := time.Unix(rapid.Int64Range(0, 4e9).Draw(t, "start"), 0).In(z)
			s.Actions = append(s.Actions, crm.Action{Kind: crm.KindPickupWindowChange, ShipmentRef: rapid.StringN(1, 10, -1).Draw(t, "ref"),
				Window: &crm.Window{Start: start, End: start.Add(time.Duration(rapid.IntRange(0, 86400).Draw(t, "len")) * time.Second)}})
		default:
			s.Actions = append(s.Actions, crm.Action{Kind: crm.KindNextCall, Date: date("date")})
		}
	}
	return s
}

// deliverTo posts body under the set's key straight to the handler.
func deliverTo(sim *Server, key string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/action-sets", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+TokenDefault)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Delivery-Attempt", "1")
	rec := httptest.NewRecorder()
	sim.Handler().ServeHTTP(rec, req)
	return rec
}

// TestPropertyReplaysAndConflicts: for any set the webhook target sends,
// the CRM double applies it (201), takes the same content in another
// field order and spacing, with unknown fields, as a replay (200), refuses
// other content under the key (409), and holds exactly what was sent.
func TestPropertyReplaysAndConflicts(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		sim, err := New(Config{Clock: clock.NewStub(epoch)})
		if err != nil {
			t.Fatal(err)
		}
		set := genSet(t)
		key := set.IdempotencyKey()
		body, err := connector.WebhookBody(set)
		if err != nil {
			t.Fatal(err)
		}
		if rec := deliverTo(sim, key, body); rec.Code != http.StatusCreated {
			t.Fatalf("first: %d %s", rec.Code, rec.Body)
		}

		var generic map[string]any
		if err := json.Unmarshal(body, &generic); err != nil {
			t.Fatal(err)
		}
		generic["unknown_"+strconv.Itoa(rapid.IntRange(0, 9).Draw(t, "unknown"))] = rapid.String().Draw(t, "unknown.value")
		indent := rapid.SampledFrom([]string{"", " ", "\t"}).Draw(t, "indent")
		reordered, _ := json.MarshalIndent(generic, "", indent) // sorted keys: another order than the target's
		if rec := deliverTo(sim, key, reordered); rec.Code != http.StatusOK {
			t.Fatalf("same content reordered: %d %s", rec.Code, rec.Body)
		}

		other := set
		other.Actions = slices.Clone(set.Actions)
		other.Actions[0].Text += "!"
		otherBody, _ := connector.WebhookBody(other)
		if rec := deliverTo(sim, key, otherBody); rec.Code != http.StatusConflict {
			t.Fatalf("other content: %d %s", rec.Code, rec.Body)
		}

		held := sim.ActionSets()
		if len(held) != 1 {
			t.Fatalf("holds %d sets", len(held))
		}
		again, _ := connector.WebhookBody(held[0])
		if !bytes.Equal(again, body) {
			t.Fatalf("held set encodes to\n%s\nsent\n%s", again, body)
		}
		st := sim.Stats()
		if st.Applied != 1 || st.Replays != 1 || st.Conflicts != 1 || st.ApplyCount[key] != 1 || !bytes.Equal(st.Bodies[key], body) {
			t.Fatalf("stats %+v", st)
		}
	})
}
