// Command screenshot writes a PNG of the status page (package statuspage)
// with demo data, rendered by headless Chromium: `make screenshot`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/status"
	"github.com/callscribe/callscribe/internal/headless"
)

func main() {
	out := flag.String("o", "status.png", "the PNG to write")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "screenshot:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	now := time.Now().UTC().Truncate(time.Second)
	snap := demo(now)
	sessions, err := status.NewSessions(noSessions{}, 0, nil)
	if err != nil {
		return err
	}
	h, err := status.New(status.Config{
		Snapshot:   func(context.Context) (status.Snapshot, error) { return snap, nil },
		IsAdmin:    func(*http.Request) (bool, error) { return true, nil }, // demo data on loopback only
		SignIn:     func(context.Context, string) (int64, bool, error) { return 0, false, nil },
		StillValid: func(context.Context, int64) (bool, error) { return false, nil },
		Sessions:   sessions,
	})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, stop, err := headless.New(context.Background())
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("sections"))); err != nil {
		return err
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, png, 0o644); err != nil { //nolint:gosec // a picture for people
		return err
	}
	fmt.Println("wrote", out)
	return nil
}

// noSessions is the screenshot's session store: it has no database and
// no one signs in (IsAdmin lets the browser in).
type noSessions struct{}

var errNoSessions = errors.New("screenshot: no sessions")

func (noSessions) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errNoSessions
}

func (noSessions) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{} }

type errRow struct{}

func (errRow) Scan(...any) error { return errNoSessions }

// demo is a plausible afternoon: two tenants, one scope cooling down after
// a 429, a provider whose limit was learned lower, a dead delivery.
func demo(now time.Time) status.Snapshot {
	var peaks, tts []status.MinutePeak
	for i := 59; i >= 0; i-- {
		m := now.Truncate(time.Minute).Add(-time.Duration(i) * time.Minute)
		peaks = append(peaks, status.MinutePeak{Minute: m, Peak: min(3+(i*7)%6, 8)})
		tts = append(tts, status.MinutePeak{Minute: m, Peak: 1 + (i*5)%3})
	}
	return status.Snapshot{
		At: now,
		Recordings: []status.RecordingCount{
			{Tenant: "acme", Lane: "batch", State: "received", Count: 41},
			{Tenant: "acme", Lane: "batch", State: "eligible", Count: 12},
			{Tenant: "acme", Lane: "batch", State: "committed", Count: 388},
			{Tenant: "northline", Lane: "immediate", State: "submitted", Count: 3},
			{Tenant: "northline", Lane: "immediate", State: "retry_wait", Count: 5},
			{Tenant: "northline", Lane: "immediate", State: "committed", Count: 164},
			{Tenant: "northline", Lane: "immediate", State: "failed", Count: 1},
		},
		Cooldowns: []status.Cooldown{{Scope: "generic-http:northline:default", Deadline: now.Add(47 * time.Second),
			Cause:  `retry-after (Retry-After: "60"): 429 Too Many Requests`,
			Window: &status.Window{Size: 1, InFlight: 0, Waiting: 5, Phase: "probe"}}},
		Providers: []status.Provider{
			{Provider: "deepgram", Kind: "stt", InUse: 5, ConfiguredLimit: 8, EffectiveLimit: 6, Learned: true, Peaks: peaks},
			{Provider: "elevenlabs", Kind: "tts", InUse: 1, ConfiguredLimit: 4, EffectiveLimit: 4, Peaks: tts},
		},
		Outbox: status.Outbox{Pending: 7, OldestAge: 94 * time.Second, Delivered: 512, Dead: 1,
			RecentDead: []status.DeadDelivery{{ID: 311, Tenant: "acme", CallID: "call-7781", Target: "hubspot", Class: "validation", Updated: now.Add(-12 * time.Minute)}}},
		Warnings: []status.Warning{
			{At: now.Add(-13 * time.Second), Kind: "cooldown", Subject: "generic-http:northline:default", Detail: "window 4 → 1: 429"},
			{At: now.Add(-21 * time.Minute), Kind: "learned-limit", Subject: "deepgram/stt", Detail: "the vendor refused at 7 in use: limit 8 → 6"},
		},
		FailOpen: []status.Counter{{Name: "leases", Value: 0}, {Name: "call slots", Value: 0}, {Name: "windows", Value: 0}},
	}
}
