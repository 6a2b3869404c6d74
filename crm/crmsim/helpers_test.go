package crmsim

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/crm"

	"github.com/callscribe/callscribe/internal/simserver"
)

// epoch is where test clocks start, with a fraction of a second so that
// rounding up to whole seconds is exercised.
var epoch = time.Date(2026, 11, 29, 17, 4, 6, 250_000_000, time.UTC)

// newScriptedSource returns a rand.Source that returns queued values, then
// "no": with a share strictly between 0 and 1, yes makes chance true and no
// makes it false.
func newScriptedSource() *simserver.ScriptedSource { return &simserver.ScriptedSource{Then: no} }

const (
	yes uint64 = 0
	no  uint64 = 1<<64 - 1
)

// bundle is what a test needs: a Server behind httptest, its clock and a
// client.
type bundle struct {
	t      *testing.T
	sim    *Server
	ts     *httptest.Server
	clock  *clock.Stub
	client *http.Client
}

// setup starts cfg's Server under httptest. A nil Clock becomes a
// clock at epoch that moves only when told and a nil Rand a fixed seed.
func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	b := &bundle{t: t}
	if cfg.Clock == nil {
		b.clock = clock.NewStub(epoch)
		cfg.Clock = b.clock
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(1, 2))
	}
	sim, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	b.sim = sim
	b.ts = httptest.NewServer(sim.Handler())
	t.Cleanup(b.ts.Close)
	b.client = b.ts.Client()
	return b
}

// testSet is the protocol's example action set.
func testSet() crm.ActionSet {
	cst := time.FixedZone("", -6*3600)
	return crm.ActionSet{
		TenantID:        "t1",
		CallID:          "call-42",
		ActionVersion:   1,
		RecordingSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		CommittedAt:     time.Date(2026, 11, 29, 17, 4, 5, 0, time.UTC),
		Actions: []crm.Action{
			{Kind: crm.KindCallNote, Text: "Caller asked for the Q1 rate sheet for Chicago to Dallas and moved the PO-5512 pickup to the morning."},
			{Kind: crm.KindRateSheetPromised, Lanes: []string{"Chicago to Dallas"}, Due: "2026-12-01"},
			{Kind: crm.KindPickupWindowChange, ShipmentRef: "PO-5512", Window: &crm.Window{
				Start: time.Date(2026, 12, 2, 8, 0, 0, 0, cst),
				End:   time.Date(2026, 12, 2, 12, 0, 0, 0, cst),
			}},
			{Kind: crm.KindNextCall, Date: "2026-12-04"},
		},
	}
}

// goldenBody is the protocol's example body, from the shared fixture.
func goldenBody(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "crm", "webhook", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// header is a request header override: an empty value removes it.
type header struct{ name, value string }

// answer is what a test reads of a response.
type answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// decode unmarshals the answer's body.
func (a answer) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.Body, v); err != nil {
		t.Fatalf("answer %d %s: %v", a.Status, a.Body, err)
	}
}

// errorType is the type of an error answer.
func (a answer) errorType(t testing.TB) string {
	var e errorBody
	a.decode(t, &e)
	return e.Error.Type
}

// post delivers body with the default token, the key t1:call-42:1 and
// attempt 1, then the overrides.
func (b *bundle) post(body []byte, headers ...header) answer {
	b.t.Helper()
	return b.postWith(b.client, body, headers...)
}

func (b *bundle) postWith(client *http.Client, body []byte, headers ...header) answer {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.ts.URL+"/v1/action-sets", bytes.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+TokenDefault)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "t1:call-42:1")
	req.Header.Set("X-Delivery-Attempt", "1")
	for _, h := range headers {
		if h.value == "" {
			req.Header.Del(h.name)
		} else {
			req.Header.Set(h.name, h.value)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		b.t.Fatalf("POST: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// mustJSON marshals v.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
