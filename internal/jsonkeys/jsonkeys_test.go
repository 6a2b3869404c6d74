package jsonkeys_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/callscribe/callscribe/internal/jsonkeys"
)

type tagged struct {
	Name    string            `json:"name"`
	At      time.Time         `json:"at"`
	Raw     *string           `json:"raw_value"`
	Skipped int               `json:"-"`
	Labels  map[string]string `json:"labels,omitempty"`
	Inner   []struct{ X int } `json:"inner,omitzero"`
	hidden  int
}

type untagged struct {
	Name      string
	CamelCase int `json:"camelCase"`
}

// recorder is a testing.TB that keeps failures instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errors = append(r.errors, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.Errorf(f, a...) }

func TestCheck(t *testing.T) {
	t.Parallel()
	var _ = tagged{}.hidden
	ok := &recorder{TB: t}
	jsonkeys.Check(ok, tagged{}, "name", "at", "raw_value", "labels", "inner")
	if len(ok.errors) != 0 {
		t.Errorf("a tagged struct with its keys: %q", ok.errors)
	}

	renamed := &recorder{TB: t}
	jsonkeys.Check(renamed, tagged{}, "name", "at", "raw", "labels", "inner")
	if len(renamed.errors) != 1 {
		t.Errorf("a renamed key: %d failures, want 1: %q", len(renamed.errors), renamed.errors)
	}

	bad := &recorder{TB: t}
	jsonkeys.Check(bad, untagged{}, "Name", "camelCase")
	if len(bad.errors) != 2 {
		t.Errorf("an untagged field and a camelCase name: %d failures, want 2: %q", len(bad.errors), bad.errors)
	}
}
