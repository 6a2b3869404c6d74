// Package docs holds callscribe's documentation as Markdown: the design,
// the stt-http/v1 and crm-webhook/v1 wire contracts, and the JSON
// reference; and the OpenAPI document of `callscribe serve`'s routes
// (openapi.json), which is its one Go value (OpenAPI), embedded so that
// the binary serves the file itself. Its test keeps the pages and the
// repository's README self-contained (every relative link resolves inside
// the repository, and no link leaves it).
package docs
