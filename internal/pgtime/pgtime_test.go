package pgtime_test

import (
	"testing"
	"time"

	"github.com/callscribe/callscribe/internal/pgtime"
)

func TestConversions(t *testing.T) {
	zone := time.FixedZone("UTC+2", 2*3600)
	local := time.Date(2026, 3, 1, 12, 0, 0, 123456789, zone)
	want := time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC)
	if got := pgtime.Write(local); !got.Equal(want) || got.Location() != time.UTC || got.Nanosecond() != want.Nanosecond() {
		t.Fatalf("Write: %v, want %v", got, want)
	}
	var zero time.Time
	for _, c := range []struct {
		name string
		got  *time.Time
		want *time.Time
	}{
		{"WritePtr", pgtime.WritePtr(&local), &want},
		{"WritePtr nil", pgtime.WritePtr(nil), nil},
		{"WritePtr zero", pgtime.WritePtr(&zero), &zero},
		{"WriteOrNull", pgtime.WriteOrNull(local), &want},
		{"WriteOrNull zero", pgtime.WriteOrNull(zero), nil},
		{"WritePtrOrNull", pgtime.WritePtrOrNull(&local), &want},
		{"WritePtrOrNull nil", pgtime.WritePtrOrNull(nil), nil},
		{"WritePtrOrNull zero", pgtime.WritePtrOrNull(&zero), nil},
	} {
		if (c.got == nil) != (c.want == nil) || c.got != nil && (!c.got.Equal(*c.want) || c.got.Location() != time.UTC) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if got := pgtime.Read(&local); !got.Equal(local) || got.Location() != time.UTC {
		t.Errorf("Read: %v, want %v in UTC", got, local)
	}
	if got := pgtime.Read(nil); !got.IsZero() {
		t.Errorf("Read nil: %v, want the zero time", got)
	}
}
