package serve

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// routeRegistrars are the functions allowed to register a pattern on an
// http.ServeMux in serve's packages and the capacity API's: each registers
// the entries of its package's route table (and a fallback answering
// 404), so that Server.Routes lists whatever serve mounts. ListenMetrics
// is `callscribe worker --metrics-addr`'s own one-route server, not serve's.
var routeRegistrars = map[string][]string{
	"cmd/callscribe/internal/serve":        {"(*routeTable).handle", "(*routeTable).mount", "(*capsAdmin).handler", "ListenMetrics"},
	"cmd/callscribe/internal/serve/ingest": {"NewHandler"},
	"capacity/httpapi":                     {"register"},
}

// routeSources are the folders, relative to the repository, whose code
// mounts what `callscribe serve` serves.
var routeSources = []string{"cmd/callscribe/internal/serve", "capacity/httpapi"}

// strayRegistrations returns the Handle and HandleFunc calls of src (one
// file of package folder dir) made outside dir's registrars, as
// "file:line in func".
func strayRegistrations(fset *token.FileSet, dir string, f *ast.File) []string {
	var out []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		name := fn.Name.Name
		if fn.Recv != nil && len(fn.Recv.List) == 1 {
			recv := fn.Recv.List[0].Type
			star := ""
			if s, ok := recv.(*ast.StarExpr); ok {
				recv, star = s.X, "*"
			}
			if id, ok := recv.(*ast.Ident); ok {
				name = "(" + star + id.Name + ")." + name
			}
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if ok && (sel.Sel.Name == "Handle" || sel.Sel.Name == "HandleFunc") && len(call.Args) == 2 &&
				!slices.Contains(routeRegistrars[dir], name) {
				p := fset.Position(call.Pos())
				out = append(out, filepath.Base(p.Filename)+":"+strconv.Itoa(p.Line)+" in "+name)
			}
			return true
		})
	}
	return out
}

// TestRoutesRegisteredOnlyFromRouteTables: no code of serve or the
// capacity API puts a route on a mux but through its route table, so a
// route cannot be mounted without Server.Routes listing it (and
// TestOpenAPIDocumentsEveryRoute finding it in docs/openapi.json).
func TestRoutesRegisteredOnlyFromRouteTables(t *testing.T) {
	t.Parallel()
	const root = "../../../.."
	fset := token.NewFileSet()
	for _, src := range routeSources {
		err := filepath.WalkDir(filepath.Join(root, src), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			dir, _ := filepath.Rel(root, filepath.Dir(path))
			for _, s := range strayRegistrations(fset, filepath.ToSlash(dir), f) {
				t.Errorf("%s/%s: a route registered outside the route table: mount it through the package's table", dir, s)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestStrayRegistrationsFindsOne breaks the rule on purpose: a HandleFunc
// beside serve's route table is reported.
func TestStrayRegistrationsFindsOne(t *testing.T) {
	t.Parallel()
	const src = `package serve
func (t *routeTable) mount() { t.mux.Handle("/", nil) }
func New() { mux.HandleFunc("GET /debug", nil) }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "server.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strayRegistrations(fset, "cmd/callscribe/internal/serve", f); !slices.Equal(got, []string{"server.go:3 in New"}) {
		t.Fatalf("stray registrations: %v, want the one in New", got)
	}
}
