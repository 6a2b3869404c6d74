package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/internal/testdb"
)

// riverUIProbeArgs is a job kind of this test only: the UI lists any kind.
type riverUIProbeArgs struct{}

func (riverUIProbeArgs) Kind() string { return "riverui_probe" }

// lockedBuffer collects a logger's lines from the UI's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const riverUITestToken = "admin-tok"

type riverUIBundle struct {
	srv    *httptest.Server
	job    *rivertype.JobRow
	logs   *lockedBuffer
	client *river.Client[pgx.Tx]
}

// setupRiverUI serves River UI as serve mounts it, on a pool acting as the
// runtime role, with one available job of riverUIProbeArgs. isAdmin nil:
// the admin token is riverUITestToken.
func setupRiverUI(t *testing.T, isAdmin func(r *http.Request) (bool, error)) riverUIBundle {
	t.Helper()
	ctx := t.Context()
	rt := testdb.AsRuntime(t, testdb.New(t))
	client, err := river.NewClient(riverpgxv5.New(rt), &river.Config{}) // insert-only
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Insert(ctx, riverUIProbeArgs{}, &river.InsertOpts{Queue: "riverui_q"})
	if err != nil {
		t.Fatalf("inserting a job as the runtime role: %v", err)
	}
	logs := &lockedBuffer{}
	h, stop, err := newRiverUI(context.Background(), client, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if isAdmin == nil {
		isAdmin = adminCheck(riverUITestToken, nil)
	}
	mux := http.NewServeMux()
	mux.Handle(RiverUIPrefix+"/", requireAdmin(h, isAdmin))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return riverUIBundle{srv: srv, job: res.Job, logs: logs, client: client}
}

// do sends method path (body as JSON) with Accept, and token as a bearer
// unless "".
func (b riverUIBundle) do(t *testing.T, method, path, token, accept, body string) (riverUIResponse, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return riverUIResponse{StatusCode: resp.StatusCode, Header: resp.Header}, string(got)
}

// riverUIResponse is what do tells of a response besides its body.
type riverUIResponse struct {
	StatusCode int
	Header     http.Header
}

type riverUIJob struct {
	ID    int64  `json:"id"`
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	State string `json:"state"`
}

func TestRiverUI(t *testing.T) {
	t.Parallel()
	b := setupRiverUI(t, nil)

	t.Run("page", func(t *testing.T) {
		resp, body := b.do(t, http.MethodGet, "/riverui/", riverUITestToken, "text/html", "")
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET /riverui/: %d %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		// The page finds its API and assets under the prefix.
		for _, want := range []string{"<title>River</title>", `"/riverui/api"`, `/riverui/assets/`} {
			if !strings.Contains(body, want) {
				t.Errorf("GET /riverui/: no %s in\n%s", want, body)
			}
		}
	})

	t.Run("jobs", func(t *testing.T) {
		resp, body := b.do(t, http.MethodGet, "/riverui/api/jobs?state=available", riverUITestToken, "application/json", "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /riverui/api/jobs: %d\n%s", resp.StatusCode, body)
		}
		var list struct{ Data []riverUIJob }
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("%v\n%s", err, body)
		}
		want := riverUIJob{ID: b.job.ID, Kind: "riverui_probe", Queue: "riverui_q", State: "available"}
		if len(list.Data) != 1 || list.Data[0] != want {
			t.Fatalf("GET /riverui/api/jobs: %+v, want [%+v]", list.Data, want)
		}
	})

	// What the UI's pages ask for besides the job list, each through the
	// runtime role's grants.
	for _, path := range []string{
		"/riverui/api/jobs/" + strconv.FormatInt(b.job.ID, 10),
		"/riverui/api/states",
		"/riverui/api/queues",
		"/riverui/api/features",
		"/riverui/api/autocomplete?facet=job_kind",
		"/riverui/api/health-checks/complete",
	} {
		t.Run("GET "+path, func(t *testing.T) {
			resp, body := b.do(t, http.MethodGet, path, riverUITestToken, "application/json", "")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d\n%s", resp.StatusCode, body)
			}
			if path != "/riverui/api/states" {
				return
			}
			var states map[string]struct{ Count int }
			if err := json.Unmarshal([]byte(body), &states); err != nil || states["available"].Count != 1 {
				t.Errorf("want 1 available job counted: %v\n%s", err, body)
			}
		})
	}

	t.Run("unauthorised", func(t *testing.T) {
		for _, tok := range []string{"", "admin-to", "admin-tok2"} {
			for _, path := range []string{"/riverui/", "/riverui/api/jobs?state=available"} {
				resp, body := b.do(t, http.MethodGet, path, tok, "*/*", "")
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("GET %s with token %q: %d, want 401\n%s", path, tok, resp.StatusCode, body)
				}
				ch := resp.Header.Values("WWW-Authenticate")
				if len(ch) != 2 || !strings.HasPrefix(ch[0], "Bearer ") || !strings.HasPrefix(ch[1], "Basic ") {
					t.Fatalf("GET %s: challenges %q, want Bearer and Basic", path, ch)
				}
				if strings.Contains(body, "riverui_probe") {
					t.Fatalf("GET %s without the token shows a job: %s", path, body)
				}
			}
		}
	})

	t.Run("basic auth, as a browser sends it", func(t *testing.T) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.srv.URL+"/riverui/api/jobs?state=available", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("anyone", riverUITestToken)
		resp, err := b.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("basic auth with the token: %d", resp.StatusCode)
		}
	})

	// Last: it changes the job. Cancelling is an UPDATE the runtime role may
	// do; deleting a job needs its DELETE on river_job.
	t.Run("cancel and delete", func(t *testing.T) {
		ids := `{"ids":["` + strconv.FormatInt(b.job.ID, 10) + `"]}`
		if resp, body := b.do(t, http.MethodPost, "/riverui/api/jobs/cancel", riverUITestToken, "application/json", ids); resp.StatusCode != http.StatusOK {
			t.Fatalf("cancel: %d\n%s", resp.StatusCode, body)
		}
		job, err := b.client.JobGet(t.Context(), b.job.ID)
		if err != nil || job.State != rivertype.JobStateCancelled {
			t.Fatalf("after cancel: %v %v", job, err)
		}
		if resp, body := b.do(t, http.MethodPost, "/riverui/api/jobs/delete", riverUITestToken, "application/json", ids); resp.StatusCode != http.StatusOK {
			t.Fatalf("delete: %d\n%s", resp.StatusCode, body)
		}
		if _, err := b.client.JobGet(t.Context(), b.job.ID); err == nil {
			t.Fatal("the job is still there after delete")
		}
	})

	if logs := b.logs.String(); strings.Contains(logs, "level=ERROR") || strings.Contains(logs, "permission denied") {
		t.Errorf("river ui logged errors as the runtime role:\n%s", logs)
	}
}

// TestRiverUIAdminTokens: serve's token store decides, and a tenant's token
// is not an admin's; a store that cannot answer gives 503, not 401.
func TestRiverUIAdminTokens(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testdb.New(t)
	store := auth.New(pool)
	_, admin, err := store.Create(ctx, "", "ops", true)
	if err != nil {
		t.Fatal(err)
	}
	_, tenant, err := store.Create(ctx, "acme", "acme", false)
	if err != nil {
		t.Fatal(err)
	}
	rt := testdb.AsRuntime(t, pool)
	down := testdb.AsRuntime(t, pool)
	down.Close()

	b := setupRiverUI(t, adminCheck(riverUITestToken, serveAuthenticator(rt)))
	for _, c := range []struct {
		token string
		want  int
	}{
		{admin, http.StatusOK},
		{riverUITestToken, http.StatusOK},
		{tenant, http.StatusUnauthorized},
		{admin + "x", http.StatusUnauthorized},
	} {
		if resp, body := b.do(t, http.MethodGet, "/riverui/api/jobs", c.token, "application/json", ""); resp.StatusCode != c.want {
			t.Errorf("token %.8s…: %d, want %d\n%s", c.token, resp.StatusCode, c.want, body)
		}
	}

	b = setupRiverUI(t, adminCheck("", serveAuthenticator(down)))
	resp, body := b.do(t, http.MethodGet, "/riverui/api/jobs", admin, "application/json", "")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("token store down: %d Retry-After %q, want 503 with Retry-After\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}
