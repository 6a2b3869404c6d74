package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/riverqueue/river/rivertype"
)

// TestAttackRiverUICrossSite: River UI's API, which cancels and deletes
// jobs, is not driven from another site with the admin's cached Basic
// credentials (a <form enctype=text/plain> posting JSON-looking text), nor
// by any request a browser marks as not same-origin; the UI's own requests
// still work.
func TestAttackRiverUICrossSite(t *testing.T) {
	t.Parallel()
	b := setupRiverUI(t, nil)
	ids := `{"ids":["` + strconv.FormatInt(b.job.ID, 10) + `"]}`
	// send POSTs body to path with Basic credentials, as a browser that was
	// given the token once sends them, and the headers h.
	send := func(t *testing.T, method, path string, h map[string]string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, b.srv.URL+path, strings.NewReader(ids))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("any", riverUITestToken)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := b.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
	}
	state := func(t *testing.T) rivertype.JobState {
		t.Helper()
		job, err := b.client.JobGet(context.Background(), b.job.ID)
		if err != nil {
			t.Fatalf("the job: %v", err)
		}
		return job.State
	}

	const evil = "https://evil.example"
	for _, c := range []struct {
		name string
		h    map[string]string
	}{
		{"form text/plain from another site", map[string]string{"Content-Type": "text/plain", "Origin": evil}},
		{"form text/plain, modern browser", map[string]string{"Content-Type": "text/plain", "Origin": evil, "Sec-Fetch-Site": "cross-site"}},
		{"form text/plain, no Origin (old browser)", map[string]string{"Content-Type": "text/plain"}},
		{"urlencoded form", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": evil}},
		{"multipart form", map[string]string{"Content-Type": "multipart/form-data; boundary=x", "Origin": evil}},
		{"json from another site", map[string]string{"Content-Type": "application/json", "Origin": evil}},
		{"json, Origin null", map[string]string{"Content-Type": "application/json", "Origin": "null"}},
		{"json, same-site", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"}},
		{"json, cross-site", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}},
		{"json, https Origin of this host", map[string]string{"Content-Type": "application/json", "Origin": strings.Replace(b.srv.URL, "http:", "https:", 1)}},
		{"text/plain with a json suffix", map[string]string{"Content-Type": "text/plain; x=application/json", "Origin": evil}},
	} {
		for _, path := range []string{"/riverui/api/jobs/cancel", "/riverui/api/jobs/delete"} {
			code, ct, body := send(t, http.MethodPost, path, c.h)
			if code != http.StatusForbidden {
				t.Errorf("%s: POST %s: %d, want 403\n%s", c.name, path, code, body)
				continue
			}
			var e struct{ Error string }
			if !strings.HasPrefix(ct, "application/json") || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
				t.Errorf("%s: POST %s: 403 of %q %q, want a JSON error", c.name, path, ct, body)
			}
		}
		if s := state(t); s != rivertype.JobStateAvailable {
			t.Fatalf("%s: the job is %s: the cross-site request acted", c.name, s)
		}
	}

	// The UI's own requests, from its page: fetch marks them same-origin,
	// Origin is this server's.
	same := map[string]string{"Content-Type": "application/json", "Origin": b.srv.URL, "Sec-Fetch-Site": "same-origin"}
	if code, _, body := send(t, http.MethodPost, "/riverui/api/jobs/cancel", same); code != http.StatusOK {
		t.Fatalf("same-origin json cancel: %d\n%s", code, body)
	}
	if s := state(t); s != rivertype.JobStateCancelled {
		t.Fatalf("after a same-origin cancel the job is %s", s)
	}
	// River UI v0.22.0's page posts its JSON as fetch's default
	// text/plain;charset=UTF-8: a browser vouches for it as same-origin.
	page := map[string]string{"Content-Type": "text/plain;charset=UTF-8", "Origin": b.srv.URL, "Sec-Fetch-Site": "same-origin"}
	if code, _, body := send(t, http.MethodPost, "/riverui/api/jobs/retry", page); code != http.StatusOK {
		t.Fatalf("the page's own retry: %d\n%s", code, body)
	}
	if s := state(t); s != rivertype.JobStateAvailable {
		t.Fatalf("after the page's retry the job is %s", s)
	}
	// A script of an operator: JSON, no browser headers.
	if code, _, body := send(t, http.MethodPost, "/riverui/api/jobs/delete", map[string]string{"Content-Type": "application/json; charset=utf-8"}); code != http.StatusOK {
		t.Fatalf("json delete without browser headers: %d\n%s", code, body)
	}
	if _, err := b.client.JobGet(context.Background(), b.job.ID); err == nil {
		t.Fatal("the job is still there after a same-origin delete")
	}
}

// TestCrossSite: crossSite's decisions, behind a proxy that ends TLS too.
func TestCrossSite(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method string
		h      map[string]string
		ok     bool
	}{
		{"GET", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, true},
		{"HEAD", nil, true},
		{"POST", map[string]string{"Content-Type": "application/json"}, true},
		{"POST", map[string]string{"Content-Type": "Application/JSON; charset=utf-8"}, true},
		{"POST", map[string]string{"Content-Type": "application/json", "Origin": "http://ops.example:8081"}, true},
		{"POST", map[string]string{"Content-Type": "application/json", "Origin": "https://ops.example:8081"}, false},
		{"POST", map[string]string{"Content-Type": "application/json", "Origin": "https://ops.example", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "ops.example"}, true},
		{"POST", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "ops.example"}, false},
		{"POST", map[string]string{"Content-Type": "text/plain;charset=UTF-8", "Sec-Fetch-Site": "same-origin"}, true},
		{"PUT", map[string]string{"Origin": "http://ops.example:8081"}, true},
		{"PUT", nil, false},
		{"DELETE", map[string]string{"Content-Type": "text/plain"}, false},
		{"POST", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "none"}, false},
		{"POST", map[string]string{"Content-Type": "application/json-seq"}, false},
		{"POST", map[string]string{"Content-Type": "application/json", "Origin": "null"}, false},
	} {
		r := httptest.NewRequest(c.method, "http://ops.example:8081/riverui/api/jobs/cancel", nil)
		for k, v := range c.h {
			r.Header.Set(k, v)
		}
		if why := crossSite(r); (why == "") != c.ok {
			t.Errorf("%s %v: crossSite %q, want ok=%v", c.method, c.h, why, c.ok)
		}
	}
}
