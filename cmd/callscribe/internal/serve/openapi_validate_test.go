package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/callscribe/callscribe/docs"
	"github.com/callscribe/callscribe/internal/route"
)

// registerHTML lets openapi3filter read the text/html bodies of the status
// page and River UI as the strings the document says they are.
var registerHTML sync.Once

// apiDoc is docs/openapi.json loaded, validated as OpenAPI 3.1, and its
// router.
type apiDoc struct {
	doc    *openapi3.T
	router routers.Router
}

// loadAPIDoc loads the document the binary embeds (docs.OpenAPI), or the
// one given.
func loadAPIDoc(t *testing.T, data []byte) apiDoc {
	t.Helper()
	registerHTML.Do(func() { openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder) })
	if data == nil {
		data = docs.OpenAPI
	}
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatalf("loading docs/openapi.json: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		t.Fatalf("docs/openapi.json is OpenAPI %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("docs/openapi.json is not a valid OpenAPI 3.1 document: %v", err)
	}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("routing docs/openapi.json: %v", err)
	}
	return apiDoc{doc: doc, router: r}
}

// undocumented returns the routes the document has no operation for.
func (d apiDoc) undocumented(routes []route.Route) []string {
	var out []string
	for _, r := range routes {
		if p := d.doc.Paths.Value(r.Path); p == nil || p.GetOperation(r.Method) == nil {
			out = append(out, r.String())
		}
	}
	return out
}

// unmounted returns the document's operations that no route serves.
func (d apiDoc) unmounted(routes []route.Route) []string {
	mounted := map[string]bool{}
	for _, r := range routes {
		mounted[r.Method+" "+r.Path] = true
	}
	var out []string
	for path, item := range d.doc.Paths.Map() {
		for method := range item.Operations() {
			if !mounted[method+" "+path] {
				out = append(out, method+" "+path)
			}
		}
	}
	slices.Sort(out)
	return out
}

// validationOptions: every response status must be documented; a request
// body on an operation without one is refused; a security scheme is met
// when the request carries its credential (whether the server accepts it
// is the server's to say, and the test's to check).
func validationOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus:             true,
		RejectWhenRequestBodyNotSpecified: true,
		MultiError:                        true,
		AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
			r := in.RequestValidationInput.Request
			s := in.SecurityScheme
			switch {
			case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"):
				if scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") && cred != "" {
					return nil
				}
			case s.Type == "http" && strings.EqualFold(s.Scheme, "basic"):
				if _, _, ok := r.BasicAuth(); ok {
					return nil
				}
			case s.Type == "apiKey" && s.In == "cookie":
				if _, err := r.Cookie(s.Name); err == nil {
					return nil
				}
			}
			return in.NewError(nil)
		},
	}
}

// exchange is one request and its answer, to be validated.
type exchange struct {
	method, target string
	header         http.Header
	body           []byte
	status         int
	respHeader     http.Header
	respBody       []byte
}

// validation is what the document says of an exchange.
type validation struct {
	// route: the operation's route (Path as the document writes it).
	route   route.Route
	tags    []string
	request error // nil: the request conforms
}

// validate checks ex against the document: its route must be documented,
// and its response conform (status, headers, body; no body where none is
// documented); what the request's validation says is returned for the
// caller to judge (a deliberate mistake must be refused by the document
// too).
func (d apiDoc) validate(t *testing.T, ex exchange) (validation, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), ex.method, "http://callscribe.test"+ex.target, bytes.NewReader(ex.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = ex.header.Clone()
	rt, params, err := d.router.FindRoute(req)
	if err != nil {
		return validation{}, fmt.Errorf("%s %s: not in docs/openapi.json: %w", ex.method, ex.target, err)
	}
	v := validation{route: route.Route{Method: ex.method, Path: rt.Path}, tags: rt.Operation.Tags}
	opts := validationOptions()
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: rt, Options: opts}
	v.request = openapi3filter.ValidateRequest(context.Background(), in)
	// The response is validated against the request as it was sent.
	in.Request, _ = http.NewRequestWithContext(context.Background(), ex.method, "http://callscribe.test"+ex.target, bytes.NewReader(ex.body))
	in.Request.Header = ex.header.Clone()
	return v, d.validateResponse(in, ex)
}

// validateResponse checks ex's response against in's operation.
func (d apiDoc) validateResponse(in *openapi3filter.RequestValidationInput, ex exchange) error {
	err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: ex.status, Header: ex.respHeader, Body: io.NopCloser(bytes.NewReader(ex.respBody)),
		Options: validationOptions(),
	})
	if err != nil {
		return err
	}
	if r := in.Route.Operation.Responses.Status(ex.status); r != nil && len(r.Value.Content) == 0 && len(ex.respBody) > 0 {
		return fmt.Errorf("status %d is documented without a body, but the answer has %d bytes: %.200s", ex.status, len(ex.respBody), ex.respBody)
	}
	return nil
}

// renamed returns the JSON body with the first key named from renamed to,
// wherever it is nested.
func renamed(t *testing.T, body []byte, from, to string) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	done := false
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if val, ok := x[from]; ok && !done {
				delete(x, from)
				x[to] = val
				done = true
				return
			}
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	if !done {
		t.Fatalf("no key %q in %s", from, body)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
