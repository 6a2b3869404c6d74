// Package docs holds callscribe's documentation as Markdown: the design,
// the stt-http/v1 and crm-webhook/v1 wire contracts, and the JSON
// reference. It has no Go API; its test keeps the pages and the
// repository's README self-contained (every relative link resolves inside
// the repository, and no link leaves it).
package docs
