package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
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

// architectureViolations checks the dependency rules of DESIGN.md's layout
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
func architectureViolations(pkgs []listedPackage) []string {
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

// The packages keep DESIGN.md's dependency rules: cmd/callscribe is the
// only composition root.
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

// Each rule fails when broken.
func TestArchitectureViolationsFindEachRuleBroken(t *testing.T) {
	t.Parallel()
	m := func(p string) string { return module + "/" + p }
	tests := []struct {
		name string
		pkg  listedPackage
		want string // "" = allowed
	}{
		{"jobs on crm/target", listedPackage{ImportPath: m("jobs"), Deps: []string{m("crm/target")}}, "jobs depends on the CRM connector package crm/target"},
		{"jobs on crm/connector", listedPackage{ImportPath: m("jobs"), Deps: []string{m("crm/connector")}}, "jobs depends on the CRM connector package crm/connector"},
		{"jobs/stt on crm/connector/x", listedPackage{ImportPath: m("jobs/stt"), Deps: []string{m("crm/connector/x")}}, "jobs/stt depends on the CRM connector package crm/connector/x"},
		{"jobs on crm and ledger", listedPackage{ImportPath: m("jobs"), Deps: []string{m("crm"), m("ledger")}}, ""},
		{"internal on jobs", listedPackage{ImportPath: m("internal/x"), Deps: []string{m("jobs")}}, "internal/x (a leaf helper) depends on jobs"},
		{"internal on outbox", listedPackage{ImportPath: m("internal/x"), Imports: []string{m("outbox")}, Deps: []string{m("outbox")}}, "internal/x (a leaf helper) depends on outbox"},
		{"internal test on crm/crmsim", listedPackage{ImportPath: m("internal/x"), TestImports: []string{m("crm/crmsim")}}, "internal/x (a leaf helper) depends on crm/crmsim"},
		{"internal xtest on capacity", listedPackage{ImportPath: m("internal/cmd/y"), XTestImports: []string{m("capacity")}}, "internal/cmd/y (a leaf helper) depends on capacity"},
		{"internal test helper on migrations", listedPackage{ImportPath: m("internal/testdb"), Deps: []string{m("migrations")}}, ""},
		{"internal on crmx (not crm)", listedPackage{ImportPath: m("internal/x"), Deps: []string{m("crmx")}}, ""},
		{"ledger on jobs", listedPackage{ImportPath: m("ledger"), Deps: []string{m("jobs")}}, "ledger depends on its sibling jobs"},
		{"ledger/retryafter on capacity", listedPackage{ImportPath: m("ledger/retryafter"), Deps: []string{m("capacity")}}, "ledger/retryafter depends on its sibling capacity"},
		{"capacity on ledger/retryafter", listedPackage{ImportPath: m("capacity"), Deps: []string{m("ledger/retryafter")}}, "capacity depends on its sibling ledger/retryafter"},
		{"ledger on its own and internal", listedPackage{ImportPath: m("ledger"), Deps: []string{m("ledger/retryafter"), m("internal/scrub"), "github.com/jackc/pgx/v5"}}, ""},
		{"capacity's tests are not its deps", listedPackage{ImportPath: m("capacity"), TestImports: []string{m("jobs")}}, ""},
		{"ledger and capacity on clock", listedPackage{ImportPath: m("capacity/live"), Deps: []string{m("clock"), m("capacity")}}, ""},
		{"clock on internal", listedPackage{ImportPath: m("clock"), Deps: []string{m("internal/scrub"), "time"}}, "clock (a leaf) depends on internal/scrub"},
		{"clock on ledger", listedPackage{ImportPath: m("clock"), Deps: []string{m("ledger")}}, "clock (a leaf) depends on ledger"},
		{"internal on clock", listedPackage{ImportPath: m("internal/simserver"), Deps: []string{m("clock")}}, ""},
	}
	for _, tt := range tests {
		got := architectureViolations([]listedPackage{tt.pkg})
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("%s: %q, want none", tt.name, got)
		case tt.want != "" && !slices.Equal(got, []string{tt.want}):
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
