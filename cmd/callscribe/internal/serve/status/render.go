package status

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"sort"
	"time"
)

//go:embed page.tmpl
var pageSource string

// script refreshes the sections: it is inline, and allowed by its hash in
// the Content-Security-Policy.
//
//go:embed refresh.js
var script string

var (
	pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
		"chart": chartOf,
		"ago":   ago,
		"at":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"hm":    func(t time.Time) string { return t.UTC().Format("15:04") },
		"script": func() template.JS {
			return template.JS(script) //nolint:gosec // the package's own embedded script, no input in it
		},
	}).Parse(pageSource))
	scriptHash = func() string {
		s := sha256.Sum256([]byte(script))
		return "sha256-" + base64.StdEncoding.EncodeToString(s[:])
	}()
	// contentSecurityPolicy allows the page's own inline style and script
	// and requests to its own origin: nothing external.
	contentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; script-src '" + scriptHash +
		"'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

// view is what the templates read: a Snapshot with its tables grouped.
type view struct {
	Snapshot
	Tenants      []tenantRow
	States       []string
	RefreshEvery time.Duration
	// Login: the sign-in form's message ("" none).
	LoginError string
}

// tenantRow is one tenant and lane's counts, per state in view.States.
type tenantRow struct {
	Tenant, Lane string
	Counts       []int
	Total        int
}

func viewOf(s Snapshot, every time.Duration) view {
	v := view{Snapshot: s, RefreshEvery: every}
	seen := map[string]bool{}
	for _, r := range s.Recordings {
		if !seen[r.State] {
			seen[r.State] = true
			v.States = append(v.States, r.State)
		}
	}
	sort.Slice(v.States, func(i, j int) bool { return stateOrder(v.States[i]) < stateOrder(v.States[j]) })
	index := map[string]int{}
	for i, st := range v.States {
		index[st] = i
	}
	rows := map[[2]string]*tenantRow{}
	var keys [][2]string
	for _, r := range s.Recordings {
		k := [2]string{r.Tenant, r.Lane}
		row := rows[k]
		if row == nil {
			row = &tenantRow{Tenant: r.Tenant, Lane: r.Lane, Counts: make([]int, len(v.States))}
			rows[k] = row
			keys = append(keys, k)
		}
		row.Counts[index[r.State]] += r.Count
		row.Total += r.Count
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		v.Tenants = append(v.Tenants, *rows[k])
	}
	return v
}

// stateOrder puts the ledger's states in the pipeline's order; others last.
func stateOrder(s string) string {
	order := []string{"received", "eligible", "submitted", "retry_wait", "transcribed", "validated", "committed",
		"failed", "expired"}
	for i, o := range order {
		if o == s {
			return fmt.Sprintf("%02d", i)
		}
	}
	return "99" + s
}

func ago(d time.Duration) string {
	switch {
	case d <= 0:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// Render writes the whole page of s; every is the refresh interval (0:
// RefreshEveryDefault).
func Render(w io.Writer, s Snapshot, every time.Duration) error {
	return execute(w, "page", viewOf(s, refreshOr(every)))
}

// RenderSections writes only the page's sections: what the refresh
// script fetches from DataPath and swaps in.
func RenderSections(w io.Writer, s Snapshot) error {
	return execute(w, "sections", viewOf(s, 0))
}

// renderLogin writes the sign-in page, with msg ("" none).
func renderLogin(w io.Writer, msg string) error {
	return execute(w, "login", view{LoginError: msg})
}

func execute(w io.Writer, name string, v view) error {
	var buf bytes.Buffer
	if err := pageTmpl.ExecuteTemplate(&buf, name, v); err != nil {
		return fmt.Errorf("statuspage: rendering %s: %w", name, err)
	}
	_, err := buf.WriteTo(w)
	return err
}

func refreshOr(d time.Duration) time.Duration {
	if d <= 0 {
		return RefreshEveryDefault
	}
	return d
}
