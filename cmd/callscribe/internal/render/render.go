// Package render prints what the callscribe commands show: aligned tables
// and reports for people, and indented JSON, written to an io.Writer from
// data already read. It opens nothing and decides nothing.
package render

import (
	"encoding/json"
	"io"
	"time"

	"github.com/callscribe/callscribe/internal/scrub"
)

// Printable escapes the control characters of stored text (a vendor's
// message in a reason, say) before it reaches the terminal: an ESC is
// shown as \x1b, never sent. Text stored since callscribe strips them at
// the adapters is unchanged; this covers older rows and operator input.
func Printable(s string) string { return scrub.Printable(s) }

// OrDash is s, or "-" when s is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Time is t in UTC as RFC 3339, or "-" for the zero time.
func Time(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// JSON writes v as JSON indented by two spaces.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
