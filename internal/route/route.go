// Package route names the operations an HTTP handler serves, so that one
// table of them both registers the handler's routes and lists them: for
// `callscribe serve`'s route table (serve.Server.Routes), and for the
// test that holds that table against the OpenAPI document
// (docs/openapi.json). It is a leaf: it imports nothing of callscribe.
//
// A handler built from such a table cannot serve an operation the table
// does not list; what it does not promise is that the document describes
// the operation: that is the serve test's.
package route

// Route is one operation: a method on a path.
type Route struct {
	// Method is the HTTP method, upper case (GET, POST, PUT). A GET route
	// answers HEAD too, as http.ServeMux's do.
	Method string
	// Path is the operation's path as the OpenAPI document writes it,
	// "{name}" for a path parameter: "/v1/calls/{call_id}/dial",
	// "/v1/recordings/{id}:retry".
	Path string
	// Subtree: Path ends in "/" and the handler serves every path below
	// it too, with methods of its own (River UI's pages and JSON API),
	// documented as the one operation Method Path.
	Subtree bool
}

// String is "METHOD PATH", with " (and below)" for a subtree.
func (r Route) String() string {
	if r.Subtree {
		return r.Method + " " + r.Path + " (and below)"
	}
	return r.Method + " " + r.Path
}
