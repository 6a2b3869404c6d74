package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is callscribe's module path.
const module = "github.com/callscribe/callscribe"

// listedPackage is what `go list -json` says of one package.
type listedPackage struct {
	ImportPath   string
	Imports      []string // direct, non-test
	Deps         []string // transitive, non-test
	TestImports  []string
	XTestImports []string
}

// rel is p's path inside the module ("" for a path outside it).
func rel(p string) string {
	if p == module {
		return "."
	}
	r, ok := strings.CutPrefix(p, module+"/")
	if !ok {
		return ""
	}
	return r
}

// under reports whether the module path p is dir or inside it.
func under(p, dir string) bool {
	r := rel(p)
	return r == dir || strings.HasPrefix(r, dir+"/")
}

// drawnEdges is the module's package graph as docs/design.md draws it (its
// table "package | may import"): a package matching a row's from may
// import the module packages matching one of its to. A pattern is a
// package path inside the module ("jobs"), the path and every package
// under it ("jobs/..."), or any package of the module ("..."). Standard
// library and third-party imports are not edges. A package may match
// several rows; a row with no to imports nothing of the module.
//
// The table keeps the rules of ruleViolations (TestDrawnEdgesKeepTheRules)
// and agrees with docs/design.md's (TestDrawnEdgesAreInTheDesign).
var drawnEdges = []struct {
	from string
	to   []string
}{
	// The binary: its commands and its internal packages (serve's
	// surfaces, configuration, demo) compose the others.
	{"cmd/callscribe/...", []string{"..."}},
	// The pipeline commits through a jobs.CommitFunc and asks jobs.Slots:
	// no outbox, no CRM connector.
	{"jobs/...", []string{"jobs/...", "ledger/...", "capacity", "crm", "crm/extract", "clock", "internal/..."}},
	{"outbox/...", []string{"outbox/...", "ledger/...", "capacity", "crm", "crm/connector/...", "clock", "internal/..."}},
	{"ledger/...", []string{"ledger/...", "clock", "internal/..."}},
	{"capacity/...", []string{"capacity/...", "clock", "internal/..."}},
	{"crm/...", []string{"crm/...", "clock", "internal/..."}},
	// Leaf helpers import one another; a test helper may use migrations.
	{"internal/...", []string{"internal/...", "clock", "migrations"}},
	{"clock", nil},
	{"migrations", nil},
	{"docs", nil},
}

// matches reports whether the module path p matches pattern (drawnEdges).
func matches(p, pattern string) bool {
	if rel(p) == "" {
		return false
	}
	if pattern == "..." {
		return true
	}
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return under(p, dir)
	}
	return rel(p) == pattern
}

// drawn reports whether drawnEdges lets from import to.
func drawn(from, to string) bool {
	for _, row := range drawnEdges {
		if !matches(from, row.from) {
			continue
		}
		for _, pattern := range row.to {
			if matches(to, pattern) {
				return true
			}
		}
	}
	return false
}

// architectureViolations is every broken rule (ruleViolations) and every
// import of a module package not drawn (undrawnEdges).
func architectureViolations(pkgs []listedPackage) []string {
	out := slices.Concat(ruleViolations(pkgs), undrawnEdges(pkgs))
	slices.Sort(out)
	return slices.Compact(out)
}

// undrawnEdges returns each direct import, by a package's own code (not
// its tests), of a module package that drawnEdges does not draw.
func undrawnEdges(pkgs []listedPackage) []string {
	var out []string
	for _, p := range pkgs {
		for _, d := range p.Imports {
			if rel(d) == "" || d == p.ImportPath || drawn(p.ImportPath, d) {
				continue
			}
			out = append(out, rel(p.ImportPath)+" imports "+rel(d)+
				": an edge not drawn; draw it in docs/design.md (the dependency diagram and table) and in drawnEdges, or drop the import")
		}
	}
	return out
}

// ruleViolations checks the dependency rules of docs/design.md's layout
// and returns each broken one:
//   - jobs (and its sub-packages) depends on no CRM connector package
//     (crm/target, crm/connector): connectors are the outbox's;
//   - no package under internal/, its tests included, imports jobs, outbox,
//     crm or capacity (or their sub-packages): internal/ holds leaf helpers;
//     a test helper may use migrations;
//   - ledger and capacity (and their sub-packages) depend on no sibling
//     package outside internal/ but clock;
//   - clock, the one time source every package may take, depends on no
//     package of the module.
func ruleViolations(pkgs []listedPackage) []string {
	var out []string
	for _, p := range pkgs {
		switch {
		case under(p.ImportPath, "jobs"):
			for _, d := range p.Deps {
				if under(d, "crm/target") || under(d, "crm/connector") {
					out = append(out, rel(p.ImportPath)+" depends on the CRM connector package "+rel(d))
				}
			}
		case under(p.ImportPath, "internal"):
			for _, d := range slices.Concat(p.Deps, p.TestImports, p.XTestImports) {
				for _, domain := range []string{"jobs", "outbox", "crm", "capacity"} {
					if under(d, domain) {
						out = append(out, rel(p.ImportPath)+" (a leaf helper) depends on "+rel(d))
					}
				}
			}
		case under(p.ImportPath, "ledger") || under(p.ImportPath, "capacity"):
			own := strings.SplitN(rel(p.ImportPath), "/", 2)[0]
			for _, d := range p.Deps {
				if r := rel(d); r != "" && !under(d, own) && !under(d, "internal") && !under(d, "clock") {
					out = append(out, rel(p.ImportPath)+" depends on its sibling "+r)
				}
			}
		case under(p.ImportPath, "clock"):
			for _, d := range p.Deps {
				if r := rel(d); r != "" && !under(d, "clock") {
					out = append(out, rel(p.ImportPath)+" (a leaf) depends on "+r)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// The packages keep docs/design.md's dependency rules and import only
// along its drawn edges: cmd/callscribe is the only composition root.
func TestArchitecture(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[rel(p.ImportPath)] = true
	}
	for _, want := range []string{"jobs", "outbox", "ledger", "capacity", "clock", "internal/testdb"} {
		if !seen[want] {
			t.Fatalf("go list did not list %s: the check would prove nothing", want)
		}
	}
	for _, v := range architectureViolations(pkgs) {
		t.Error(v)
	}
}

// Each rule fails when broken, and so does an edge not drawn.
func TestArchitectureViolationsFindEachRuleBroken(t *testing.T) {
	t.Parallel()
	m := func(p string) string { return module + "/" + p }
	undrawn := func(from, to string) string {
		return from + " imports " + to + ": an edge not drawn; draw it in docs/design.md (the dependency diagram and table) and in drawnEdges, or drop the import"
	}
	tests := []struct {
		name string
		pkg  listedPackage
		want string // "" = allowed
		// also: a second violation expected with want ("" = none).
		also string
	}{
		{"jobs on crm/target", listedPackage{ImportPath: m("jobs"), Deps: []string{m("crm/target")}}, "jobs depends on the CRM connector package crm/target", ""},
		{"jobs on crm/connector", listedPackage{ImportPath: m("jobs"), Deps: []string{m("crm/connector")}}, "jobs depends on the CRM connector package crm/connector", ""},
		{"jobs/stt on crm/connector/x", listedPackage{ImportPath: m("jobs/stt"), Deps: []string{m("crm/connector/x")}}, "jobs/stt depends on the CRM connector package crm/connector/x", ""},
		{"jobs on crm and ledger", listedPackage{ImportPath: m("jobs"), Deps: []string{m("crm"), m("ledger")}}, "", ""},
		{"internal on jobs", listedPackage{ImportPath: m("internal/x"), Deps: []string{m("jobs")}}, "internal/x (a leaf helper) depends on jobs", ""},
		{"internal on outbox", listedPackage{ImportPath: m("internal/x"), Imports: []string{m("outbox")}, Deps: []string{m("outbox")}}, "internal/x (a leaf helper) depends on outbox", undrawn("internal/x", "outbox")},
		{"internal test on crm/crmsim", listedPackage{ImportPath: m("internal/x"), TestImports: []string{m("crm/crmsim")}}, "internal/x (a leaf helper) depends on crm/crmsim", ""},
		{"internal xtest on capacity", listedPackage{ImportPath: m("internal/cmd/y"), XTestImports: []string{m("capacity")}}, "internal/cmd/y (a leaf helper) depends on capacity", ""},
		{"internal test helper on migrations", listedPackage{ImportPath: m("internal/testdb"), Deps: []string{m("migrations")}}, "", ""},
		{"internal on crmx (not crm)", listedPackage{ImportPath: m("internal/x"), Deps: []string{m("crmx")}}, "", ""},
		{"ledger on jobs", listedPackage{ImportPath: m("ledger"), Deps: []string{m("jobs")}}, "ledger depends on its sibling jobs", ""},
		{"ledger/retryafter on capacity", listedPackage{ImportPath: m("ledger/retryafter"), Deps: []string{m("capacity")}}, "ledger/retryafter depends on its sibling capacity", ""},
		{"capacity on ledger/retryafter", listedPackage{ImportPath: m("capacity"), Deps: []string{m("ledger/retryafter")}}, "capacity depends on its sibling ledger/retryafter", ""},
		{"ledger on its own and internal", listedPackage{ImportPath: m("ledger"), Deps: []string{m("ledger/retryafter"), m("internal/scrub"), "github.com/jackc/pgx/v5"}}, "", ""},
		{"capacity's tests are not its deps", listedPackage{ImportPath: m("capacity"), TestImports: []string{m("jobs")}}, "", ""},
		{"ledger and capacity on clock", listedPackage{ImportPath: m("capacity/live"), Deps: []string{m("clock"), m("capacity")}}, "", ""},
		{"clock on internal", listedPackage{ImportPath: m("clock"), Deps: []string{m("internal/scrub"), "time"}}, "clock (a leaf) depends on internal/scrub", ""},
		{"clock on ledger", listedPackage{ImportPath: m("clock"), Deps: []string{m("ledger")}}, "clock (a leaf) depends on ledger", ""},
		{"internal on clock", listedPackage{ImportPath: m("internal/simserver"), Deps: []string{m("clock")}}, "", ""},
		// Edges: a direct import by a package's own code must be drawn.
		{"undrawn: ledger imports outbox", listedPackage{ImportPath: m("ledger"), Imports: []string{m("outbox")}}, undrawn("ledger", "outbox"), ""},
		{"undrawn: jobs imports outbox", listedPackage{ImportPath: m("jobs/stt"), Imports: []string{m("outbox"), "github.com/riverqueue/river"}}, undrawn("jobs/stt", "outbox"), ""},
		{"undrawn: internal imports ledger", listedPackage{ImportPath: m("internal/lane"), Imports: []string{m("ledger")}}, undrawn("internal/lane", "ledger"), ""},
		{"undrawn: a package no row names", listedPackage{ImportPath: m("newpkg"), Imports: []string{m("clock")}}, undrawn("newpkg", "clock"), ""},
		{"undrawn: crm/extract imports jobs", listedPackage{ImportPath: m("crm/extract"), Imports: []string{m("jobs")}}, undrawn("crm/extract", "jobs"), ""},
		{"drawn: a new leaf under internal", listedPackage{ImportPath: m("internal/fielderr"), Imports: []string{m("internal/scrub"), m("clock")}}, "", ""},
		{"drawn: a new package under cmd/callscribe", listedPackage{ImportPath: m("cmd/callscribe/internal/serve/x"), Imports: []string{m("outbox"), m("jobs"), m("crm/connector")}}, "", ""},
		{"drawn: capacity's internal packages", listedPackage{ImportPath: m("capacity/internal/redisx"), Imports: []string{m("capacity/internal/keys"), m("internal/scrub")}}, "", ""},
		{"drawn: outbox on a connector", listedPackage{ImportPath: m("outbox"), Imports: []string{m("crm/connector/hubspot"), m("ledger/retryafter")}}, "", ""},
		{"tests' imports are not edges", listedPackage{ImportPath: m("jobs"), TestImports: []string{m("outbox")}, XTestImports: []string{m("crm/crmsim")}}, "", ""},
		{"a package importing itself", listedPackage{ImportPath: m("clock"), Imports: []string{m("clock")}}, "", ""},
	}
	for _, tt := range tests {
		got := architectureViolations([]listedPackage{tt.pkg})
		want := []string{tt.want}
		if tt.also != "" {
			want = append(want, tt.also)
			slices.Sort(want)
		}
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("%s: %q, want none", tt.name, got)
		case tt.want != "" && !slices.Equal(got, want):
			t.Errorf("%s: %q, want %q", tt.name, got, want)
		}
	}
}

// The table draws no edge that breaks a rule: each row's from and to
// patterns, taken as a package (the pattern's folder, and a package under
// it), keep ruleViolations.
func TestDrawnEdgesKeepTheRules(t *testing.T) {
	t.Parallel()
	examples := func(pattern string) []string {
		if pattern == "..." {
			return []string{"jobs", "outbox", "crm/connector", "ledger", "capacity", "internal/x", "migrations", "clock"}
		}
		if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
			return []string{dir, dir + "/sub"}
		}
		return []string{pattern}
	}
	for _, row := range drawnEdges {
		for _, to := range row.to {
			for _, f := range examples(row.from) {
				if f == "..." || strings.HasPrefix(f, "cmd/callscribe") {
					continue // the composition root keeps no rule
				}
				for _, d := range examples(to) {
					pkg := listedPackage{ImportPath: module + "/" + f, Imports: []string{module + "/" + d}, Deps: []string{module + "/" + d}}
					if v := ruleViolations([]listedPackage{pkg}); len(v) != 0 {
						t.Errorf("drawnEdges row %s -> %s breaks a rule: %q", row.from, to, v)
					}
				}
			}
		}
	}
}

// designEdges reads docs/design.md's dependency table ("| package | may
// import"): each row's package patterns, and what they may import (none:
// nothing of the module).
func designEdges(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	out := map[string][]string{}
	in := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "| package | may import"):
			in = true
			continue
		case !in || strings.HasPrefix(line, "|---"):
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("docs/design.md's dependency table: row %q has not two cells", line)
		}
		var to []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			to = append(to, m[1])
		}
		slices.Sort(to)
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			if _, dup := out[m[1]]; dup {
				t.Errorf("docs/design.md's dependency table names %s twice", m[1])
			}
			out[m[1]] = to
		}
	}
	if len(out) == 0 {
		t.Fatal(`docs/design.md has no dependency table (a header "| package | may import ...")`)
	}
	return out
}

// drawnEdges and docs/design.md's dependency table say the same: every row
// of one is a row of the other, with the same patterns it may import.
func TestDrawnEdgesAreInTheDesign(t *testing.T) {
	t.Parallel()
	design := designEdges(t)
	code := map[string][]string{}
	for _, row := range drawnEdges {
		to := slices.Clone(row.to)
		slices.Sort(to)
		code[row.from] = to
	}
	for from, to := range code {
		doc, ok := design[from]
		switch {
		case !ok:
			t.Errorf("drawnEdges has a row for %s that docs/design.md's dependency table has not: add it there (and to the diagram)", from)
		case !slices.Equal(doc, to):
			t.Errorf("%s may import %q in drawnEdges but %q in docs/design.md's dependency table: make them agree (and the diagram)", from, to, doc)
		}
	}
	for from := range design {
		if _, ok := code[from]; !ok {
			t.Errorf("docs/design.md's dependency table has a row for %s that drawnEdges has not", from)
		}
	}
}
