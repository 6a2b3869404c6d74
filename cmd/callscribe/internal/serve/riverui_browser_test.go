package serve

import (
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/internal/headless"
)

// TestAttackRiverUICrossSiteInBrowser: in headless Chromium that sends the
// admin's Basic credentials with every request (as once given at River
// UI's login prompt), a page of another site posts a <form
// enctype=text/plain> to River UI's cancel: refused, the job stays. Then
// River UI's own page sends its requests as its script does (fetch, the
// JSON as a string body, so text/plain;charset=UTF-8; a PUT without a
// body): they pass.
func TestAttackRiverUICrossSiteInBrowser(t *testing.T) {
	t.Parallel()
	if _, err := headless.Path(); err != nil {
		t.Fatal(err) // not skipped: the browser test must run
	}
	b := setupRiverUI(t, nil)
	id := fmt.Sprint(b.job.ID)
	target := b.srv.URL + "/riverui/api/jobs/cancel"
	// The form's one field is name=value: the body is {"ids":["ID"],"pad":"="}.
	evilPage := `<!doctype html><form method=POST enctype="text/plain" action="` + html.EscapeString(target) + `">` +
		`<input name='{"ids":["` + id + `"],"pad":"' value='"}'></form><script>document.forms[0].submit()</script>`
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(evilPage))
	}))
	defer evil.Close()
	// Another site: localhost is not 127.0.0.1.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	bctx, stop, err := headless.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	bctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+riverUITestToken))
	if err := chromedp.Do(bctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": basic}})
		return err
	})); err != nil {
		t.Fatal(err)
	}

	if err := chromedp.Do(bctx, chromedp.Navigate(evilURL)); err != nil {
		t.Fatalf("the other site's page: %v", err)
	}
	// The form lands on the target's answer.
	landed, err := chromedp.Run(bctx, chromedp.Poll[string](`location.href.startsWith(`+jsString(b.srv.URL)+`) && document.readyState === "complete" ? document.body.innerText : ""`,
		chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("the form's post never landed: %v", err)
	}
	job, err := b.client.JobGet(context.Background(), b.job.ID)
	if err != nil || job.State != rivertype.JobStateAvailable {
		t.Fatalf("after another site's form: job %v %v, want it available (the answer: %s)", job, err, landed)
	}
	if !strings.Contains(landed, "error") {
		t.Errorf("the form's answer: %s, want the refusal", landed)
	}

	// River UI's page, and its requests as its script sends them.
	if err := chromedp.Do(bctx, chromedp.Navigate(b.srv.URL+"/riverui/")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Cancel int `json:"cancel"`
		Pause  int `json:"pause"`
	}
	got, err := chromedp.Run(bctx, chromedp.Evaluate[result](`(async () => {
		const h = () => new Headers({Accept: "application/json"});
		const c = await fetch("/riverui/api/jobs/cancel", {method: "POST", body: JSON.stringify({ids: [`+jsString(id)+`]}), headers: h()});
		const p = await fetch("/riverui/api/queues/riverui_q/pause", {method: "PUT", headers: h()});
		return {cancel: c.status, pause: p.status};
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got.Cancel != http.StatusOK || got.Pause == http.StatusForbidden {
		t.Fatalf("River UI's own requests: %+v, want cancel 200 and pause not 403", got)
	}
	if job, err := b.client.JobGet(context.Background(), b.job.ID); err != nil || job.State != rivertype.JobStateCancelled {
		t.Fatalf("after the page's cancel: job %v %v", job, err)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
