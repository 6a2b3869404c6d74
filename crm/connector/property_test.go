package connector

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/crm"
)

// genIDPart draws a tenant or call id: often plain, sometimes with upper
// case, separators, slashes, spaces or other scripts, sometimes long.
func genIDPart(t *rapid.T, label string) string {
	return rapid.OneOf(
		rapid.SampledFrom([]string{"t1", "T1", "t1:x", "x:1", "call-42", "Call-42", "a.b", "a/b"}),
		rapid.StringMatching(`[a-z0-9._-]{1,12}`),
		rapid.StringMatching(`[A-Za-z0-9:/ _.é字-]{1,16}`),
		rapid.StringMatching(`[a-z]{100,140}`),
	).Draw(t, label)
}

// genDate draws a YYYY-MM-DD date.
func genDate(t *rapid.T, label string) string {
	day := rapid.IntRange(0, 365*30).Draw(t, label)
	return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, day).Format(dateLayout)
}

// genSet draws a valid action set: one call_note among 0 to 5 other
// actions, times with sub-second parts and offsets.
func genSet(t *rapid.T) crm.ActionSet {
	zone := func(label string) *time.Location {
		return time.FixedZone("", rapid.IntRange(-14*60, 14*60).Draw(t, label)*60)
	}
	instant := func(label string) time.Time {
		return time.Unix(rapid.Int64Range(0, 4_000_000_000).Draw(t, label+".s"), rapid.Int64Range(0, 999_999_999).Draw(t, label+".ns"))
	}
	s := crm.ActionSet{
		TenantID:        genIDPart(t, "tenant"),
		CallID:          genIDPart(t, "call"),
		ActionVersion:   rapid.IntRange(1, 1<<30).Draw(t, "version"),
		RecordingSHA256: rapid.StringMatching(`[0-9a-f]{64}`).Draw(t, "sha"),
		CommittedAt:     instant("committed").In(zone("committed.zone")),
	}
	n := rapid.IntRange(0, 5).Draw(t, "others")
	for i := 0; i < n; i++ {
		var a crm.Action
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			a = crm.Action{Kind: crm.KindRateSheetPromised, Lanes: rapid.SliceOfN(rapid.String(), 1, 3).Draw(t, "lanes"), Due: genDate(t, "due")}
		case 1:
			z := zone("window.zone")
			start := instant("window").In(z)
			end := start.Add(time.Duration(rapid.Int64Range(0, int64(48*time.Hour)).Draw(t, "window.len")))
			a = crm.Action{Kind: crm.KindPickupWindowChange, ShipmentRef: rapid.StringN(1, 20, -1).Draw(t, "ref"), Window: &crm.Window{Start: start, End: end}}
		default:
			a = crm.Action{Kind: crm.KindNextCall, Date: genDate(t, "date")}
		}
		s.Actions = append(s.Actions, a)
	}
	note := crm.Action{Kind: crm.KindCallNote, Text: rapid.String().Draw(t, "text")}
	at := rapid.IntRange(0, len(s.Actions)).Draw(t, "note.at")
	s.Actions = slices.Insert(s.Actions, at, note)
	return s
}

// sameInstantAndOffset reports whether a and b are the same instant with
// the same UTC offset.
func sameInstantAndOffset(a, b time.Time) bool {
	_, oa := a.Zone()
	_, ob := b.Zone()
	return a.Equal(b) && oa == ob
}

// TestPropertyWebhookBodyRoundTrip: for any valid set, the webhook body
// holds the protocol's fields only, is a valid delivery for checkDelivery,
// and unmarshals to the set, with committed_at in UTC and every time to the
// second.
func TestPropertyWebhookBodyRoundTrip(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genSet(t)
		if err := checkDelivery(Delivery{Set: s, Attempt: 1}); err != nil {
			t.Fatalf("generated an invalid set: %v", err)
		}
		body, err := WebhookBody(s)
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			t.Fatal(err)
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range fields {
				if !yield(k) {
					return
				}
			}
		})
		if want := []string{"action_version", "actions", "call_id", "committed_at", "recording_sha256", "tenant_id"}; !slices.Equal(keys, want) {
			t.Fatalf("fields %v, want %v", keys, want)
		}
		var committed string
		_ = json.Unmarshal(fields["committed_at"], &committed)
		if !strings.HasSuffix(committed, "Z") || len(committed) != len("2006-01-02T15:04:05Z") {
			t.Fatalf("committed_at %q is not RFC 3339 UTC to the second", committed)
		}

		var got crm.ActionSet
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got.TenantID != s.TenantID || got.CallID != s.CallID || got.ActionVersion != s.ActionVersion ||
			got.RecordingSHA256 != s.RecordingSHA256 || got.IdempotencyKey() != s.IdempotencyKey() {
			t.Fatalf("identity fields changed: %+v", got)
		}
		if !got.CommittedAt.Equal(s.CommittedAt.Truncate(time.Second)) || got.CommittedAt.Location() != time.UTC {
			t.Fatalf("committed_at %v, want %v in UTC", got.CommittedAt, s.CommittedAt.Truncate(time.Second))
		}
		if len(got.Actions) != len(s.Actions) {
			t.Fatalf("%d actions, want %d", len(got.Actions), len(s.Actions))
		}
		for i, a := range s.Actions {
			g := got.Actions[i]
			if g.Kind != a.Kind || g.Text != a.Text || !slices.Equal(g.Lanes, a.Lanes) || g.Due != a.Due ||
				g.ShipmentRef != a.ShipmentRef || g.Date != a.Date || (g.Window == nil) != (a.Window == nil) {
				t.Fatalf("actions[%d] = %+v, want %+v", i, g, a)
			}
			if a.Window != nil && (!sameInstantAndOffset(g.Window.Start, a.Window.Start.Truncate(time.Second)) ||
				!sameInstantAndOffset(g.Window.End, a.Window.End.Truncate(time.Second))) {
				t.Fatalf("actions[%d].window = %+v, want %+v to the second", i, *g.Window, *a.Window)
			}
		}
		// The decoded set encodes to the same bytes: what a replay from a
		// store sends is what the first delivery sent.
		again, err := WebhookBody(got)
		if err != nil || string(again) != string(body) {
			t.Fatalf("re-encoded body differs:\n%s\n%s", again, body)
		}
	})
}

// TestPropertyExternalIDs: external ids are unique per (tenant, call,
// version, index), at most 255 characters, and the same on every call.
func TestPropertyExternalIDs(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		type owner struct {
			tenant, call string
			version, i   int
		}
		seen := map[string]owner{}
		sets := rapid.SliceOfN(rapid.Custom(genSet), 1, 8).Draw(t, "sets")
		for _, s := range sets {
			for i := range s.Actions {
				id := ExternalID(s, i)
				o := owner{s.TenantID, s.CallID, s.ActionVersion, i}
				if prev, ok := seen[id]; ok && prev != o {
					t.Fatalf("%q is the id of %+v and of %+v", id, prev, o)
				}
				seen[id] = o
				if len(id) > ExternalIDMaxLen || id == "" {
					t.Fatalf("%q is %d bytes", id, len(id))
				}
				if id != ExternalID(s, i) {
					t.Fatalf("ExternalID is not stable for %+v", o)
				}
				// Lower-case only, so that case-insensitive matching
				// cannot merge two ids.
				if strings.ToLower(id) != id {
					t.Fatalf("%q has upper case", id)
				}
			}
		}
	})
}

// TestPropertySalesforcePathsStable: delivering a set twice, through two
// target instances, upserts the same records: the same paths in the same
// order, one per action, all different.
func TestPropertySalesforcePathsStable(t *testing.T) {
	t.Parallel()
	f := newFakeCRM(t, answer(204, nil))
	rapid.Check(t, func(t *rapid.T) {
		s := genSet(t)
		before := len(f.requests())
		for range 2 {
			tg, err := New(f.config(KindSalesforce))
			if err != nil {
				t.Fatal(err)
			}
			if r, err := tg.Deliver(t.Context(), Delivery{Set: s, Attempt: 1}); err != nil || r.Outcome != OutcomeReplayed {
				t.Fatalf("Deliver: %+v, %v", r, err)
			}
		}
		reqs := f.requests()[before:]
		n := len(s.Actions)
		if len(reqs) != 2*n {
			t.Fatalf("%d requests, want %d", len(reqs), 2*n)
		}
		distinct := map[string]bool{}
		for i := range n {
			if reqs[i].Path != reqs[n+i].Path {
				t.Fatalf("action %d: %s then %s", i, reqs[i].Path, reqs[n+i].Path)
			}
			distinct[reqs[i].Path] = true
			last := reqs[i].Path[strings.LastIndexByte(reqs[i].Path, '/')+1:]
			if v, err := url.PathUnescape(last); err != nil || v != ExternalID(s, i) {
				t.Fatalf("action %d: path ends %q, want the escaped %q", i, last, ExternalID(s, i))
			}
		}
		if len(distinct) != n {
			t.Fatalf("%d distinct paths for %d actions", len(distinct), n)
		}
	})
}
