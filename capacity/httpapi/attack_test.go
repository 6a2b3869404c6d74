package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/capacity/httpapi"
)

// orgTokensSetup serves the API with tokens for organisations acme and
// rival and an admin token, and returns a client per token.
func orgTokensSetup(t *testing.T) (acme, rival, admin, stranger httpBundle) {
	t.Helper()
	tokens := map[string]struct {
		org   string
		admin bool
	}{"tok-acme": {org: "acme"}, "tok-rival": {org: "rival"}, "tok-admin": {admin: true}}
	b := httpSetup(t, httpapi.Options{Authenticate: func(_ context.Context, bearer string) (string, bool, bool, error) {
		p, ok := tokens[bearer]
		return p.org, p.admin, ok, nil
	}}, true)
	as := func(tok string) httpBundle { c := b; c.token = tok; return c }
	return as("tok-acme"), as("tok-rival"), as("tok-admin"), as("tok-nobody")
}

// A key is its field only in the field's exact case: encoding/json read
// {"ORG": ...} as org, so that a gateway that checks "org" and the server
// could disagree about whom a request is for. It is refused, naming the
// key and the name it is not.
func TestAttackWrongCaseKeyRefused(t *testing.T) {
	t.Parallel()
	acme, _, _, _ := orgTokensSetup(t)
	for _, c := range []struct{ path, body, field string }{
		{"/v1/slots", `{"ORG":"acme"}`, "ORG"},
		{"/v1/slots", `{"org":"acme","Campaign":"spring"}`, "Campaign"},
		{"/v1/leases/release", `{"lease":{"ID":"x","provider":"vox","kind":"stt"}}`, "lease.ID"},
	} {
		code, got, _ := acme.do(t, "POST", c.path, c.body)
		if code != 400 || errType(got) != "invalid_request" || errField(got, "field") != c.field {
			t.Errorf("%s %s: %d %v, want 400 naming %s", c.path, c.body, code, got, c.field)
			continue
		}
		if msg, _ := errField(got, "message").(string); !strings.Contains(msg, "case-sensitive") {
			t.Errorf("%s %s: message %q does not say keys are case-sensitive", c.path, c.body, msg)
		}
	}
	if code, got, _ := acme.do(t, "POST", "/v1/slots", `{"org":"acme"}`); code != 200 {
		t.Fatalf("the same request in the right case: %d %v", code, got)
	}
}

// A key twice in one object is refused, wherever the object is:
// encoding/json let the last one win, so that {"org":"rival","org":"acme"}
// was acme's to the server and rival's to anything that reads the first.
func TestAttackDuplicateKeyRefused(t *testing.T) {
	t.Parallel()
	acme, _, admin, _ := orgTokensSetup(t)
	for _, c := range []struct{ path, body, field string }{
		{"/v1/slots", `{"org":"rival","org":"acme"}`, "org"},
		{"/v1/slots", `{"org":"acme","timeout_ms":0,"timeout_ms":5}`, "timeout_ms"},
		{"/v1/leases/refresh", `{"leases":[{"id":"a","provider":"vox","kind":"stt","id":"b"}]}`, "leases[0].id"},
		{"/v1/leases", `{"provider":"vox","kind":"stt","holder":"h","lane":"live","lane":"batch"}`, "lane"},
	} {
		code, got, _ := acme.do(t, "POST", c.path, c.body)
		if code != 400 || errType(got) != "invalid_request" || errField(got, "field") != c.field {
			t.Errorf("%s %s: %d %v, want 400 naming %s", c.path, c.body, code, got, c.field)
			continue
		}
		if msg, _ := errField(got, "message").(string); !strings.Contains(msg, "duplicate key") {
			t.Errorf("%s %s: message %q does not say duplicate key", c.path, c.body, msg)
		}
	}
	// Nothing was taken: acme holds no slot.
	if code, got, _ := admin.do(t, "GET", "/v1/status", ""); code != 200 || got["live_calls"] != float64(0) {
		t.Fatalf("status after the refused requests: %d %v, want live_calls 0", code, got)
	}
}

// A body is JSON only as application/json: application/jsonp (a script),
// application/json-seq (a stream) and text/json are other media types and
// get 415.
func TestAttackJSONLookalikeMediaTypesRefused(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{}, true)
	for _, ct := range []string{"application/jsonp", "application/json-seq", "text/json", "application/jsonx; charset=utf-8", "application/json; charset=latin1"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.url+"/v1/slots", strings.NewReader(`{"org":"acme"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(raw), "unsupported_media_type") {
			t.Errorf("Content-Type %s: %d %s, want 415", ct, resp.StatusCode, raw)
		}
	}
}

// An organisation's token sees in /v1/status only counters of its own
// requests: its live calls, not the platform's auth_failures (how many
// strangers knocked), nor every organisation's calls and vendor leases.
// An admin token sees them all.
func TestAttackOrgTokenSeesNoPlatformCounters(t *testing.T) {
	t.Parallel()
	acme, rival, admin, stranger := orgTokensSetup(t)
	if code, _, _ := stranger.do(t, "GET", "/v1/status", ""); code != 401 {
		t.Fatalf("a stranger's status: %d, want 401", code)
	}
	for _, c := range []struct {
		b   httpBundle
		org string
	}{{acme, "acme"}, {rival, "rival"}, {rival, "rival"}} {
		if code, got, _ := c.b.do(t, "POST", "/v1/slots", `{"org":"`+c.org+`"}`); code != 200 {
			t.Fatalf("%s's slot: %d %v", c.org, code, got)
		}
	}
	code, got, _ := acme.do(t, "GET", "/v1/status", "")
	if code != 200 {
		t.Fatalf("acme's status: %d %v", code, got)
	}
	for _, k := range []string{"auth_failures", "providers"} {
		if v, ok := got[k]; ok {
			t.Errorf("acme's status shows the platform's %s: %v", k, v)
		}
	}
	if got["org"] != "acme" || got["live_calls"] != float64(1) {
		t.Errorf("acme's status: %v, want org acme and its 1 live call", got)
	}
	code, got, _ = admin.do(t, "GET", "/v1/status", "")
	if code != 200 || got["auth_failures"] != float64(1) || got["live_calls"] != float64(3) || got["providers"] == nil {
		t.Errorf("admin's status: %d %v, want auth_failures 1, live_calls 3 and the providers", code, got)
	}
}

// A provider name, the one free-text name of a lease request (holders and
// the other ids are A-Z a-z 0-9 . _ -), refuses invisible format and
// bidirectional control characters, naming the field and the byte: "vox\u200b"
// would show as the configured "vox" while being counted as another.
func TestAttackInvisibleCharactersInProviderRefused(t *testing.T) {
	t.Parallel()
	b := httpSetup(t, httpapi.Options{}, false)
	for _, c := range []struct{ path, body, field, at string }{
		{"/v1/leases", `{"provider":"vox\u200b","kind":"stt","holder":"h","lane":"live"}`, "provider", "U+200B at byte 3"},
		{"/v1/leases", `{"provider":"\u202evox","kind":"stt","holder":"h","lane":"live"}`, "provider", "U+202E at byte 0"},
		{"/v1/leases/release", `{"lease":{"id":"x","provider":"v\u2066ox","kind":"stt"}}`, "lease.provider", "U+2066 at byte 1"},
	} {
		code, got, _ := b.do(t, "POST", c.path, c.body)
		msg, _ := errField(got, "message").(string)
		if code != 400 || errField(got, "field") != c.field || !strings.Contains(msg, c.at) {
			t.Errorf("%s %s: %d %v, want 400 naming %s and %s", c.path, c.body, code, got, c.field, c.at)
		}
	}
}
