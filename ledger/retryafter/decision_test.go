package retryafter

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
)

func TestDecisionString(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		header  string
		present bool
		attempt int
		want    string
	}{
		{"used", "120", true, 0,
			`source=retry-after form=delay-seconds raw="120" attempt=0 delay=2m0s not_before=2026-03-01T12:02:00Z`},
		{"clamped", "7200", true, 0,
			`source=retry-after form=delay-seconds raw="7200" attempt=0 delay=1h0m0s requested=2h0m0s clamped=true not_before=2026-03-01T13:00:00Z`},
		{"missing", "", false, 2,
			`source=backoff fallback=missing attempt=2 delay=2s not_before=2026-03-01T12:00:02Z`},
		{"malformed", "soon\"", true, 0,
			`source=backoff fallback=non-numeric raw="soon\"" attempt=0 delay=500ms not_before=2026-03-01T12:00:00.5Z`},
		{"past date", "Sun, 06 Nov 1994 08:49:37 GMT", true, 1,
			`source=backoff fallback=past-date form=imf-fixdate date_reference=host-clock raw="Sun, 06 Nov 1994 08:49:37 GMT" attempt=1 delay=1s not_before=2026-03-01T12:00:01Z`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := Policy{Clock: clock.NewStub(testNow), Rand: middleRand()}
			if got := p.Decide(tt.header, tt.present, tt.attempt).String(); got != tt.want {
				t.Errorf("String() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestDecisionLogValue(t *testing.T) {
	t.Parallel()

	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	p := Policy{Clock: clock.NewStub(testNow), Rand: middleRand()}
	logger.Info("throttled", "decision", p.Decide("99999", true, 0))

	want := `level=INFO msg=throttled decision.source=retry-after decision.form=delay-seconds decision.raw=99999 ` +
		`decision.attempt=0 decision.delay=1h0m0s decision.requested=27h46m39s decision.clamped=true ` +
		`decision.not_before=2026-03-01T13:00:00.000Z`
	if got := strings.TrimSpace(buf.String()); got != want {
		t.Errorf("log line =\n%s\nwant\n%s", got, want)
	}
}

// A vendor's 60,000-byte Retry-After is logged cut, with a note, and an
// ESC in it is escaped.
func TestDecisionLogsBoundedRaw(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	p := Policy{Clock: clock.NewStub(testNow), Rand: middleRand()}
	huge := strings.Repeat("x", 60000)
	d := p.Decide(huge, true, 0)
	logger.Info("throttled", "decision", d)
	for name, got := range map[string]string{"log line": buf.String(), "String": d.String()} {
		if len(got) > 700 || !strings.Contains(got, "…(truncated, 60000 bytes)") {
			t.Errorf("%s is %d bytes, want the raw value cut with a note", name, len(got))
		}
	}
	if _, err := Parse(huge, testNow); err == nil || len(err.Error()) > 400 {
		t.Errorf("Parse error of a 60,000-byte value: %d bytes", len(err.Error()))
	}
	if got := p.Decide("5\x1b[2J", true, 0).String(); strings.ContainsRune(got, 0x1b) {
		t.Errorf("String kept an ESC: %q", got)
	}
}

// TestDecisionDateReference: the reference appears in String and LogValue
// for a date, and never for another form.
func TestDecisionDateReference(t *testing.T) {
	t.Parallel()
	p := Policy{Clock: clock.NewStub(testNow.Add(5 * time.Second)), Rand: middleRand()}
	const date = "Sun, 01 Mar 2026 12:00:00 GMT"
	tests := []struct {
		name                   string
		header, responseDate   string
		wantString, wantLogged string
	}{
		{"date header", "Sun, 01 Mar 2026 12:00:07 GMT", date,
			`source=retry-after form=imf-fixdate date_reference=date-header raw="Sun, 01 Mar 2026 12:00:07 GMT" attempt=0 delay=7s not_before=2026-03-01T12:00:12Z`,
			`d.source=retry-after d.form=imf-fixdate d.date_reference=date-header d.raw="Sun, 01 Mar 2026 12:00:07 GMT" d.attempt=0 d.delay=7s d.not_before=2026-03-01T12:00:12.000Z`},
		{"host clock", "Sun, 01 Mar 2026 12:00:07 GMT", "",
			`source=retry-after form=imf-fixdate date_reference=host-clock raw="Sun, 01 Mar 2026 12:00:07 GMT" attempt=0 delay=2s not_before=2026-03-01T12:00:07Z`,
			`d.source=retry-after d.form=imf-fixdate d.date_reference=host-clock d.raw="Sun, 01 Mar 2026 12:00:07 GMT" d.attempt=0 d.delay=2s d.not_before=2026-03-01T12:00:07.000Z`},
		{"past date against the date header", "Sun, 01 Mar 2026 12:00:00 GMT", date,
			`source=backoff fallback=past-date form=imf-fixdate date_reference=date-header raw="Sun, 01 Mar 2026 12:00:00 GMT" attempt=0 delay=500ms not_before=2026-03-01T12:00:05.5Z`,
			`d.source=backoff d.fallback=past-date d.form=imf-fixdate d.date_reference=date-header d.raw="Sun, 01 Mar 2026 12:00:00 GMT" d.attempt=0 d.delay=500ms d.not_before=2026-03-01T12:00:05.500Z`},
		{"delay-seconds: no reference", "120", date,
			`source=retry-after form=delay-seconds raw="120" attempt=0 delay=2m0s not_before=2026-03-01T12:02:05Z`,
			`d.source=retry-after d.form=delay-seconds d.raw=120 d.attempt=0 d.delay=2m0s d.not_before=2026-03-01T12:02:05.000Z`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := p.DecideFor(tt.header, true, tt.responseDate, 0)
			if got := d.String(); got != tt.wantString {
				t.Errorf("String() =\n%s\nwant\n%s", got, tt.wantString)
			}
			var buf bytes.Buffer
			slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
						return slog.Attr{}
					}
					return a
				},
			})).Info("", "d", d)
			if got := strings.TrimSpace(buf.String()); got != tt.wantLogged {
				t.Errorf("log line =\n%s\nwant\n%s", got, tt.wantLogged)
			}
		})
	}
}
