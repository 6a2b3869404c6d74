package fielderr_test

import (
	"errors"
	"testing"

	"github.com/callscribe/callscribe/internal/fielderr"
)

// A field error reads as its Go path and message; In puts the field
// errors of a joined error under a path, and an error that is not a field
// error becomes one about the path itself.
func TestPaths(t *testing.T) {
	t.Parallel()
	inner := errors.Join(
		fielderr.Errorf("MinConfidence", "%g is not within 0..1", 2.0),
		errors.New("plain"),
	)
	err := fielderr.In(inner, "Tenants", fielderr.Key("t1"))
	got := fielderr.Flatten(err)
	want := []string{`Tenants["t1"].MinConfidence: 2 is not within 0..1`, `Tenants["t1"]: plain`}
	if len(got) != len(want) {
		t.Fatalf("Flatten = %q, want %q", got, want)
	}
	for i := range want {
		if got[i].Error() != want[i] {
			t.Errorf("error %d = %q, want %q", i, got[i], want[i])
		}
	}
	if k, ok := fielderr.IsKey(fielderr.Key(`a"b.c`)); !ok || k != `a"b.c` {
		t.Errorf("IsKey(Key) = %q, %v", k, ok)
	}
	if _, ok := fielderr.IsKey("Tenants"); ok {
		t.Error("a field name read as a map key")
	}
	if fielderr.In(nil, "X") != nil || fielderr.Flatten(nil) != nil {
		t.Error("nil is not kept nil")
	}
}
