package serve

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/capacity/orgcap"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/internal/testdb"
)

const capsTestToken = "caps-admin-token-0123456789-abcdefghijklmnop"

// The admin caps routes, as the runtime role: admin tokens only (401
// without one, 403 for a tenant's, 503 when the token store is down);
// bodies strict and bounded; refusals name the field; every change is
// recorded with the token that made it.
func TestCapsAdminRoutes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testdb.New(t)
	owner := auth.New(pool)
	adminTok, admin, err := owner.Create(ctx, "", "ops", true)
	if err != nil {
		t.Fatal(err)
	}
	_, tenant, err := owner.Create(ctx, "acme", "acme", false)
	if err != nil {
		t.Fatal(err)
	}
	rt := testdb.AsRuntime(t, pool)
	h := (&capsAdmin{store: orgcap.New(rt), token: capsTestToken, tokens: auth.New(rt), logger: slog.New(slog.DiscardHandler)}).handler()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	do := func(method, path, token, ctype, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return resp.StatusCode, m
	}
	field := func(m map[string]any) string {
		e, _ := m["error"].(map[string]any)
		f, _ := e["field"].(string)
		return f
	}
	const js = "application/json"

	for _, tc := range []struct {
		token string
		want  int
	}{{"", 401}, {"nope", 401}, {admin + "x", 401}, {tenant, 403}} {
		for _, r := range [][2]string{{"GET", "/v1/admin/orgs"}, {"GET", "/v1/admin/orgs/acme"}, {"PUT", "/v1/admin/orgs/acme"},
			{"PUT", "/v1/admin/orgs/acme/campaigns/spring"}, {"GET", "/v1/admin/cap-changes"}} {
			if code, got := do(r[0], r[1], tc.token, js, `{"limit": 5}`); code != tc.want {
				t.Errorf("%s %s with token %.8s…: %d %v, want %d", r[0], r[1], tc.token, code, got, tc.want)
			}
		}
	}
	// Nothing was stored by the refused requests.
	if code, got := do("GET", "/v1/admin/orgs/acme", admin, "", ""); code != 404 {
		t.Fatalf("GET an organisation without a stored cap: %d %v, want 404", code, got)
	}

	if code, got := do("PUT", "/v1/admin/orgs/acme", admin, js, `{"limit": 4, "reason": "pilot"}`); code != 200 ||
		got["cap"].(map[string]any)["limit"] != 4.0 || got["change"].(map[string]any)["prior_limit"] != nil {
		t.Fatalf("PUT org: %d %v", code, got)
	}
	if code, got := do("PUT", "/v1/admin/orgs/acme", capsTestToken, js, `{"limit": 6}`); code != 200 ||
		got["change"].(map[string]any)["prior_limit"] != 4.0 {
		t.Fatalf("PUT org with the environment's token: %d %v", code, got)
	}
	for _, tc := range []struct{ name, path, ctype, body, field string }{
		{"campaign above its org", "/v1/admin/orgs/acme/campaigns/spring", js, `{"limit": 7}`, "limit"},
		{"campaign over the max", "/v1/admin/orgs/acme/campaigns/spring", js, `{"limit": 21}`, "limit"},
		{"campaign of an org without a cap", "/v1/admin/orgs/rival/campaigns/spring", js, `{"limit": 1}`, "org"},
		{"bad org id", "/v1/admin/orgs/a%7Db", js, `{"limit": 1}`, "org"},
		{"bad campaign id", "/v1/admin/orgs/acme/campaigns/a:b", js, `{"limit": 1}`, "campaign"},
		{"org cap 0", "/v1/admin/orgs/acme", js, `{"limit": 0}`, "limit"},
		{"no limit", "/v1/admin/orgs/acme", js, `{"reason": "x"}`, "limit"},
		{"limit a string", "/v1/admin/orgs/acme", js, `{"limit": "5"}`, "limit"},
		{"unknown key", "/v1/admin/orgs/acme", js, `{"limit": 5, "campaign": "x"}`, "campaign"},
		{"key in capitals", "/v1/admin/orgs/acme", js, `{"LIMIT": 5}`, "LIMIT"},
		{"reason with a newline", "/v1/admin/orgs/acme", js, `{"limit": 5, "reason": "a\nb"}`, "reason"},
	} {
		if code, got := do("PUT", tc.path, admin, tc.ctype, tc.body); code != 400 || field(got) != tc.field {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.name, code, got, tc.field)
		}
	}
	if code, got := do("PUT", "/v1/admin/orgs/acme", admin, "text/plain", `{"limit": 5}`); code != 415 {
		t.Errorf("text/plain body: %d %v, want 415", code, got)
	}
	if code, got := do("PUT", "/v1/admin/orgs/acme", admin, js, `{"limit": 5, "reason": "`+strings.Repeat("r", 5000)+`"}`); code != 413 {
		t.Errorf("5 KB body: %d %v, want 413", code, got)
	}
	if code, got := do("PUT", "/v1/admin/orgs/acme/campaigns/spring", admin, js, `{"limit": 6}`); code != 200 {
		t.Fatalf("PUT campaign at its org's cap: %d %v", code, got)
	}
	if code, got := do("PUT", "/v1/admin/orgs/acme", admin, js, `{"limit": 5}`); code != 400 || field(got) != "limit" ||
		!strings.Contains(got["error"].(map[string]any)["message"].(string), "spring") {
		t.Fatalf("PUT org below its campaign: %d %v, want 400 naming limit and the campaign", code, got)
	}
	code, got := do("GET", "/v1/admin/orgs/acme", admin, "", "")
	if camps, _ := got["campaigns"].([]any); code != 200 || got["cap"].(map[string]any)["limit"] != 6.0 || len(camps) != 1 {
		t.Fatalf("GET org: %d %v", code, got)
	}
	if code, got := do("GET", "/v1/admin/orgs/acme/campaigns/spring", admin, "", ""); code != 200 || got["cap"].(map[string]any)["limit"] != 6.0 {
		t.Fatalf("GET campaign: %d %v", code, got)
	}
	code, got = do("GET", "/v1/admin/cap-changes?org=acme&limit=10", admin, "", "")
	changes, _ := got["changes"].([]any)
	if code != 200 || len(changes) != 3 {
		t.Fatalf("GET cap-changes: %d %v, want 3 changes", code, got)
	}
	var by []string
	for _, c := range changes {
		by = append(by, c.(map[string]any)["by"].(string))
	}
	if want := "token " + strconv.FormatInt(adminTok.ID, 10) + ",admin token (CALLSCRIBE_API_TOKEN),token " + strconv.FormatInt(adminTok.ID, 10); strings.Join(by, ",") != want {
		t.Fatalf("changes made by %v, want %s (newest first)", by, want)
	}
	if code, got := do("GET", "/v1/admin/cap-changes?limit=0", admin, "", ""); code != 400 || field(got) != "limit" {
		t.Fatalf("cap-changes limit=0: %d %v", code, got)
	}
	if code, got := do("GET", "/v1/admin/nothing", admin, "", ""); code != 404 {
		t.Fatalf("unknown admin route: %d %v", code, got)
	}

	// A token store that cannot answer: 503, not 401.
	down := testdb.AsRuntime(t, pool)
	down.Close()
	dsrv := httptest.NewServer((&capsAdmin{store: orgcap.New(rt), tokens: auth.New(down), logger: slog.New(slog.DiscardHandler)}).handler())
	t.Cleanup(dsrv.Close)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, dsrv.URL+"/v1/admin/orgs", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := dsrv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("token store down: %d, want 503 with Retry-After", resp.StatusCode)
	}
}
