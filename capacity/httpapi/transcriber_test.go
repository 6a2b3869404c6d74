package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// A call's transcriber over HTTP follows the agent's configured providers:
// primary, then a fallback with room, then the primary flagged over-limit.
func TestHTTPCallTranscriber(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	prefix := testredis.Prefix(t, rdb, "httpapi")
	leases, err := capacity.New(captest.OnRedis(t, rdb, prefix), capacity.Config{Limits: map[string]capacity.ProviderLimit{
		"vox/stt": {Limit: 1}, "echo/stt": {Limit: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.NewHandler(leases, nil, httpapi.Options{
		Agents: map[string]live.CallProviders{"dana": {STT: []string{"vox", "echo"}}}}))
	defer srv.Close()
	b := httpBundle{url: srv.URL, leases: leases}

	status, first, _ := b.do(t, http.MethodPost, "/v1/calls/c1/transcriber", `{"agent":"dana"}`)
	if status != 200 || first["provider"] != "vox" || first["lease"] == nil || first["fell_back"] != false {
		t.Fatalf("first call: %d %v", status, first)
	}
	_, second, _ := b.do(t, http.MethodPost, "/v1/calls/c2/transcriber", `{"agent":"dana"}`)
	if second["provider"] != "echo" || second["fell_back"] != true || second["over_limit"] != false {
		t.Fatalf("second call: %v", second)
	}
	_, third, _ := b.do(t, http.MethodPost, "/v1/calls/c3/transcriber", `{"agent":"dana"}`)
	if third["provider"] != "vox" || third["over_limit"] != true || third["lease"] != nil {
		t.Fatalf("third call: %v", third)
	}
	lease, _ := json.Marshal(map[string]any{"lease": first["lease"]})
	if status, _, _ := b.do(t, http.MethodPost, "/v1/leases/release", string(lease)); status != http.StatusNoContent {
		t.Fatalf("release: %d", status)
	}
	_, fourth, _ := b.do(t, http.MethodPost, "/v1/calls/c4/transcriber", `{"agent":"dana"}`)
	if fourth["provider"] != "vox" || fourth["over_limit"] != false {
		t.Fatalf("after a hang-up: %v", fourth)
	}
	if status, body, _ := b.do(t, http.MethodPost, "/v1/calls/c5/transcriber", `{"agent":"nobody"}`); status != http.StatusNotFound {
		t.Fatalf("unknown agent: %d %v", status, body)
	}
	// The call id becomes the lease's holder: it is checked like every id.
	long := strings.Repeat("c", capacity.IDMaxLen+1)
	for _, id := range []string{long, "c%7D%3Aleases", "c%20d"} {
		if status, body, _ := b.do(t, http.MethodPost, "/v1/calls/"+id+"/transcriber", `{"agent":"dana"}`); status != http.StatusBadRequest {
			t.Errorf("call id %.20q: %d %v, want 400", id, status, body)
		}
	}
}
