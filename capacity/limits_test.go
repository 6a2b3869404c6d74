package capacity_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

func leaseStatusOf(t *testing.T, l *capacity.Leases, provider, kind string) capacity.ProviderStatus {
	t.Helper()
	sts, err := l.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Provider == provider && st.Kind == kind {
			return st
		}
	}
	t.Fatalf("no status for %s/%s in %+v", provider, kind, sts)
	return capacity.ProviderStatus{}
}

func TestLimitsLearnedFromRefusal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 10}}})
	l := b.leases
	req := capacity.Request{Provider: "acme", Kind: capacity.KindSTT, Holder: "c"}
	var held []capacity.Lease
	for range 3 {
		lease, _ := l.Acquire(ctx, req)
		held = append(held, lease)
	}

	l.ReportRefusal(ctx, "acme", capacity.KindSTT, 3)
	st := leaseStatusOf(t, l, "acme", capacity.KindSTT)
	if st.InUse != 3 || st.ConfiguredLimit != 10 || st.EffectiveLimit != 2 || !st.Learned {
		t.Fatalf("status after refusal at 3: %+v, want effective 2 learned", st)
	}
	if got := l.LimitAlerts(); got != 1 {
		t.Fatalf("LimitAlerts %d, want 1", got)
	}
	if logs := b.logs.String(); !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "lowering the effective limit") {
		t.Fatalf("no warning logged:\n%s", logs)
	}
	events, err := l.LimitEvents(ctx, "acme", capacity.KindSTT)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0] != (capacity.LimitEvent{At: b.clock.Now().UTC(), Reason: "refusal", InUse: 3, From: 10, To: 2}) {
		t.Fatalf("events %+v", events)
	}

	// The learned limit binds every process sharing Redis.
	other, err := capacity.New(b.redis, b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, g := other.Acquire(ctx, req); g.Granted || g.Limit != 2 {
		t.Fatalf("another process: %+v, want refused at learned limit 2", g)
	}

	// Nothing raises it: a refusal at or above it is ignored, time passes,
	// leases are released.
	l.ReportRefusal(ctx, "acme", capacity.KindSTT, 5)
	for _, h := range held {
		l.Release(ctx, h)
	}
	b.clock.Advance(48 * time.Hour)
	for i := range 3 {
		if _, g := l.Acquire(ctx, req); g.Granted != (i < 2) || g.Limit != 2 {
			t.Fatalf("acquire %d after 48h: %+v, want limit still 2", i, g)
		}
	}
	if got := l.LimitAlerts(); got != 1 {
		t.Fatalf("LimitAlerts %d after an ignored refusal, want 1", got)
	}

	// Floor: a refusal at 1 in use cannot teach 0.
	l.ReportRefusal(ctx, "acme", capacity.KindSTT, 1)
	if st := leaseStatusOf(t, l, "acme", capacity.KindSTT); st.EffectiveLimit != capacity.LearnedLimitFloor {
		t.Fatalf("after refusal at 1: %+v, want the floor %d", st, capacity.LearnedLimitFloor)
	}

	// The operator restores it.
	if err := l.SetLimit(ctx, "acme", capacity.KindSTT, 10); err != nil {
		t.Fatal(err)
	}
	st = leaseStatusOf(t, l, "acme", capacity.KindSTT)
	if st.EffectiveLimit != 10 || st.Learned {
		t.Fatalf("after SetLimit 10: %+v", st)
	}
	if _, g := l.Acquire(ctx, req); !g.Granted || g.Limit != 10 {
		t.Fatalf("after SetLimit: %+v", g)
	}
	events, _ = l.LimitEvents(ctx, "acme", capacity.KindSTT)
	if len(events) != 3 || events[0].Reason != "set" || events[0].From != 1 || events[0].To != 10 {
		t.Fatalf("events after SetLimit: %+v", events)
	}
	if err := l.SetLimit(ctx, "nope", capacity.KindSTT, 3); err == nil {
		t.Fatal("SetLimit of an unconfigured provider: no error")
	}
	if err := l.SetLimit(ctx, "acme", capacity.KindSTT, -1); err == nil {
		t.Fatal("SetLimit -1: no error")
	}
}

func TestLimitsEventsCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := leaseSetup(t, capacity.Config{LimitEventsCap: 3, Limits: map[string]capacity.ProviderLimit{"acme/tts": {Limit: 50}}})
	for i := 40; i > 20; i -= 2 { // each below the last learned limit
		b.leases.ReportRefusal(ctx, "acme", capacity.KindTTS, i)
	}
	events, err := b.leases.LimitEvents(ctx, "acme", capacity.KindTTS)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 3 || events[0].To != 21 || b.leases.LimitAlerts() != 10 {
		t.Fatalf("events %+v alerts %d, want the 3 newest of 10", events, b.leases.LimitAlerts())
	}
}

func TestLeasePeakPerMinute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := leaseSetup(t, capacity.Config{PeakRetention: 3 * time.Minute, Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 10}}})
	l := b.leases
	req := capacity.Request{Provider: "acme", Kind: capacity.KindSTT}
	minute0 := b.clock.Now().UTC().Truncate(time.Minute)
	var held []capacity.Lease
	for range 3 {
		lease, _ := l.Acquire(ctx, req)
		held = append(held, lease)
	}
	l.Release(ctx, held[0])
	l.Release(ctx, held[1])
	l.Acquire(ctx, req) // 2 in use: minute 0 keeps 3
	b.clock.Advance(time.Minute)
	l.Acquire(ctx, req) // 3
	l.Release(ctx, held[2])
	l.Acquire(ctx, req) // 3 again
	want := []capacity.MinutePeak{{Minute: minute0, Peak: 3}, {Minute: minute0.Add(time.Minute), Peak: 3}}
	st := leaseStatusOf(t, l, "acme", capacity.KindSTT)
	if !equalPeaks(st.PeakPerMinute, want) {
		t.Fatalf("peaks %+v, want %+v", st.PeakPerMinute, want)
	}
	b.clock.Advance(4 * time.Minute)
	l.Acquire(ctx, req) // 1 (the others lapsed); older minutes are past retention
	st = leaseStatusOf(t, l, "acme", capacity.KindSTT)
	if want := []capacity.MinutePeak{{Minute: minute0.Add(5 * time.Minute), Peak: 1}}; !equalPeaks(st.PeakPerMinute, want) {
		t.Fatalf("peaks after 5 minutes %+v, want %+v", st.PeakPerMinute, want)
	}
	ttl, err := b.rdb.PTTL(ctx, b.prefix+":{acme/stt}:peak").Result()
	if err != nil || ttl <= 0 || ttl > 3*time.Minute {
		t.Fatalf("peak hash TTL %v %v, want the retention", ttl, err)
	}
}

func equalPeaks(a, b []capacity.MinutePeak) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Minute.Equal(b[i].Minute) || a[i].Peak != b[i].Peak {
			return false
		}
	}
	return true
}

// OnLimitLearned hears each drop (and nothing else) with the limits.
func TestLimitsOnLimitLearned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var heard []capacity.LimitLearned
	b := leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/stt": {Limit: 10}},
		OnLimitLearned: func(a capacity.LimitLearned) { heard = append(heard, a) }})
	b.leases.ReportRefusal(ctx, "acme", capacity.KindSTT, 4)
	b.leases.ReportRefusal(ctx, "acme", capacity.KindSTT, 9) // at or above the learned 3: unchanged
	b.leases.ReportRefusal(ctx, "nobody", capacity.KindSTT, 1)
	if len(heard) != 1 {
		t.Fatalf("heard %+v, want one alert", heard)
	}
	a := heard[0]
	if a.Provider != "acme" || a.Kind != capacity.KindSTT || a.ConfiguredLimit != 10 || a.From != 10 || a.LearnedLimit != 3 || a.InUse != 4 || a.At.IsZero() {
		t.Fatalf("alert %+v", a)
	}
}

// Refused says what a report did; a tenant's report (AtLeastCounted)
// is judged by no fewer leases than Redis holds live, and its reporter is
// kept in the event and the alert. A TTS limit learns as an STT one does.
func TestLimitsRefusedReport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var heard []capacity.LimitLearned
	b := leaseSetup(t, capacity.Config{Limits: map[string]capacity.ProviderLimit{"acme/tts": {Limit: 10}},
		OnLimitLearned: func(a capacity.LimitLearned) { heard = append(heard, a) }})
	l := b.leases
	for range 5 {
		if _, g := l.Acquire(ctx, capacity.Request{Provider: "acme", Kind: capacity.KindTTS, Holder: "c"}); !g.Granted {
			t.Fatalf("acquire: %+v", g)
		}
	}

	// Reported 2 in use while Redis holds 5: judged by 5, so 10 → 4.
	got := l.Refused(ctx, capacity.RefusalReport{Provider: "acme", Kind: capacity.KindTTS, InUse: 2, Reporter: "northline", AtLeastCounted: true})
	if want := (capacity.Refusal{Configured: true, ConfiguredLimit: 10, InUse: 5, Before: 10, After: 4, Lowered: true}); got != want {
		t.Fatalf("tenant's report at 2 with 5 held: %+v, want %+v", got, want)
	}
	// Taken as given (an operator's or the pipeline's): 2 → 1.
	if got := l.ReportRefusal(ctx, "acme", capacity.KindTTS, 2); got != (capacity.Refusal{Configured: true, ConfiguredLimit: 10, InUse: 2, Before: 4, After: 1, Lowered: true}) {
		t.Fatalf("report at 2: %+v", got)
	}
	// At or above the limit in force: nothing changes, nothing alerts.
	if got := l.ReportRefusal(ctx, "acme", capacity.KindTTS, 7); got != (capacity.Refusal{Configured: true, ConfiguredLimit: 10, InUse: 7, Before: 1, After: 1}) {
		t.Fatalf("report at 7 above the limit 1: %+v", got)
	}
	if got := l.ReportRefusal(ctx, "nobody", capacity.KindTTS, 3); got != (capacity.Refusal{InUse: 3}) {
		t.Fatalf("report of an unconfigured provider: %+v", got)
	}
	events, err := l.LimitEvents(ctx, "acme", capacity.KindTTS)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[1].Reporter != "northline" || events[1].InUse != 5 || events[1].To != 4 || events[0].Reporter != "" || events[0].To != 1 {
		t.Fatalf("events %+v", events)
	}
	if len(heard) != 2 || heard[0].Reporter != "northline" || heard[0].InUse != 5 || heard[0].LearnedLimit != 4 || heard[1].Reporter != "" {
		t.Fatalf("alerts %+v", heard)
	}
	if st := leaseStatusOf(t, l, "acme", capacity.KindTTS); st.EffectiveLimit != 1 || !st.Learned || st.InUse != 5 {
		t.Fatalf("status %+v", st)
	}
	if pl, ok := l.Configured("acme", capacity.KindTTS); !ok || pl.Limit != 10 {
		t.Fatalf("Configured(acme, tts) = %+v %v, want the configured 10", pl, ok)
	}
	if _, ok := l.Configured("acme", capacity.KindSTT); ok {
		t.Fatal("Configured(acme, stt): true, want false")
	}
}
