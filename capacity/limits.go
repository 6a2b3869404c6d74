package capacity

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"
)

// ReportRefusal tells capacity that the vendor refused a stream of
// provider/kind while inUse leases were held (the refused stream's own
// lease included). If inUse is below the effective limit, the vendor's
// real limit is lower than ours: the effective limit drops, platform-wide,
// to max(inUse − 1, LearnedLimitFloor), a warning is logged, LimitAlerts
// goes up and an event is pushed to the provider's event list in Redis.
// Nothing raises a limit again but SetLimit. Redis failures are noted
// (fail open), never returned: the answer says Failed. It is Refused with
// no reporter, taking inUse as given.
func (l *Leases) ReportRefusal(ctx context.Context, provider, kind string, inUse int) Refusal {
	return l.Refused(ctx, RefusalReport{Provider: provider, Kind: kind, InUse: inUse})
}

// RefusalReport is a vendor's refusal of a stream as its reporter saw it.
type RefusalReport struct {
	Provider, Kind string
	// InUse is how many leases of Provider/Kind were held when the vendor
	// refused, the refused stream's own included.
	InUse int
	// Reporter names who reported the refusal (an organisation), kept in
	// the limit event, the alert and the log. Default "": the process
	// itself (the pipeline) or an operator.
	Reporter string
	// AtLeastCounted raises InUse to the leases of Provider/Kind Redis
	// holds live when the report arrives, so that the report cannot teach
	// a limit below the usage Redis counts: for reports of a party not
	// trusted with the platform's limits (a tenant's token). Default
	// false: InUse is taken as given.
	AtLeastCounted bool
}

// Refusal is what a reported refusal did to the limit.
type Refusal struct {
	// Configured says Provider/Kind has a configured limit
	// (ConfiguredLimit); without one nothing is counted and the report did
	// nothing.
	Configured      bool
	ConfiguredLimit int
	// Failed says Redis could not be reached: nothing was changed and the
	// limits are not known (fail open; reported again later it counts).
	Failed bool
	// InUse is the in-use count the limit was judged by: the report's,
	// raised to Redis's count with AtLeastCounted.
	InUse int
	// Before and After are the effective limit before and after the
	// report; After < Before exactly when Lowered.
	Before, After int
	// Lowered says the report lowered the limit (and raised an alert).
	Lowered bool
}

// Refused is ReportRefusal with its reporter: it lowers the effective
// limit of r.Provider/r.Kind to max(in use − 1, LearnedLimitFloor) when
// the in-use count is below it, alerts (log, LimitAlerts,
// Config.OnLimitLearned, a limit event naming the reporter) and says what
// it did. A report at or above the limit in force changes nothing. Redis
// failures are noted (fail open), never returned.
func (l *Leases) Refused(ctx context.Context, r RefusalReport) Refusal {
	tag := l.tag(r.Provider, r.Kind)
	pl, ok := l.cfg.Limits[tag]
	if !ok {
		return Refusal{InUse: r.InUse}
	}
	octx, cancel := l.kit.Detached(ctx)
	defer cancel()
	atLeast := ""
	if r.AtLeastCounted {
		atLeast = "1"
	}
	res, err := refusalScript.Run(octx, l.kit.Client, []string{l.limitKey(tag), l.eventsKey(tag), l.leasesKey(tag)},
		l.nowArg(), pl.Limit, r.InUse, LearnedLimitFloor, l.cfg.LimitEventsCap, r.Reporter, atLeast).Int64Slice()
	if err != nil {
		l.fail.Note("report refusal "+tag, err)
		return Refusal{Configured: true, ConfiguredLimit: pl.Limit, Failed: true, InUse: r.InUse}
	}
	out := Refusal{Configured: true, ConfiguredLimit: pl.Limit, InUse: int(res[3]), Before: int(res[1]), After: int(res[2]), Lowered: res[0] == 1}
	attrs := []any{slog.String("provider", r.Provider), slog.String("kind", r.Kind), slog.Int("in_use", out.InUse)}
	if r.InUse != out.InUse {
		attrs = append(attrs, slog.Int("reported_in_use", r.InUse))
	}
	if r.Reporter != "" {
		attrs = append(attrs, slog.String("reporter", r.Reporter))
	}
	if !out.Lowered {
		l.logger.Info("capacity: vendor refused a stream at or above the effective limit; limit unchanged",
			append(attrs, slog.Int("limit", out.Before))...)
		return out
	}
	l.limitAlerts.Add(1)
	if f := l.cfg.OnLimitLearned; f != nil {
		f(LimitLearned{Provider: r.Provider, Kind: r.Kind, ConfiguredLimit: pl.Limit, From: out.Before, LearnedLimit: out.After,
			InUse: out.InUse, Reporter: r.Reporter, At: time.Now().UTC()})
	}
	l.logger.Warn("capacity: vendor refused a stream below the limit; lowering the effective limit until an operator sets it",
		append(attrs, slog.Int("from", out.Before), slog.Int("to", out.After), slog.Int("configured", pl.Limit))...)
	return out
}

// Configured returns provider/kind's configured limit; ok is false when
// Config.Limits names none (such streams are not counted).
func (l *Leases) Configured(provider, kind string) (limit ProviderLimit, ok bool) {
	limit, ok = l.cfg.Limits[l.tag(provider, kind)]
	return limit, ok
}

// LimitLearned is the alert of a limit learned from a vendor's refusal:
// provider/kind's effective limit went From → LearnedLimit (the
// configured limit being ConfiguredLimit) when the vendor refused a stream
// with InUse held.
type LimitLearned struct {
	Provider        string    `json:"provider"`
	Kind            string    `json:"kind"`
	ConfiguredLimit int       `json:"configured_limit"`
	From            int       `json:"from"`
	LearnedLimit    int       `json:"learned_limit"`
	InUse           int       `json:"in_use"`
	At              time.Time `json:"at"`
	// Reporter is RefusalReport.Reporter: "" for the process itself.
	Reporter string `json:"reporter,omitempty"`
}

// LimitAlerts returns how many times this process lowered a limit after a
// vendor refusal.
func (l *Leases) LimitAlerts() int64 { return l.limitAlerts.Load() }

// SetLimit sets provider/kind's effective limit platform-wide (the
// operator's `callscribe capacity set-limit`), forgetting any learned one.
// The operator's limit is kept in Redis and overrides Config.Limits until
// the next SetLimit (set it to the configured value to follow the
// configuration again). It is an operator action, so unlike the call-path
// methods it returns Redis errors.
func (l *Leases) SetLimit(ctx context.Context, provider, kind string, limit int) error {
	tag := l.tag(provider, kind)
	pl, ok := l.cfg.Limits[tag]
	if !ok {
		return fmt.Errorf("capacity: setting limit of %s: no limit configured for it", tag)
	}
	if limit < 0 {
		return fmt.Errorf("capacity: setting limit of %s: limit must not be negative, got %d", tag, limit)
	}
	octx, cancel := l.kit.Detached(ctx)
	defer cancel()
	before, err := setLimitScript.Run(octx, l.kit.Client, []string{l.limitKey(tag), l.eventsKey(tag)},
		l.nowArg(), pl.Limit, limit, l.cfg.LimitEventsCap).Int64()
	if err != nil {
		return fmt.Errorf("capacity: setting limit of %s: %w", tag, err)
	}
	l.logger.Info("capacity: limit set by operator", slog.String("provider", provider), slog.String("kind", kind),
		slog.Int64("from", before), slog.Int("to", limit))
	return nil
}

// LimitEvent is one change of an effective limit.
type LimitEvent struct {
	At     time.Time
	Reason string // "refusal" (learned) or "set" (operator)
	InUse  int    // in use at the refusal; -1 for "set"
	From   int
	To     int
	// Reporter is who reported the refusal (RefusalReport.Reporter): ""
	// for the pipeline, an operator, or a "set".
	Reporter string
}

// LimitEvents returns provider/kind's recent limit events, newest first
// (at most Config.LimitEventsCap are kept).
func (l *Leases) LimitEvents(ctx context.Context, provider, kind string) ([]LimitEvent, error) {
	tag := l.tag(provider, kind)
	octx, cancel := l.kit.Detached(ctx)
	defer cancel()
	raw, err := l.kit.Client.LRange(octx, l.eventsKey(tag), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("capacity: reading limit events of %s: %w", tag, err)
	}
	out := make([]LimitEvent, 0, len(raw))
	for _, r := range raw {
		var e struct {
			At       int64  `json:"at"`
			Reason   string `json:"reason"`
			InUse    int    `json:"in_use"`
			From     int    `json:"from"`
			To       int    `json:"to"`
			Reporter string `json:"reporter"`
		}
		if err := json.Unmarshal([]byte(r), &e); err != nil {
			return nil, fmt.Errorf("capacity: decoding limit event of %s: %w", tag, err)
		}
		out = append(out, LimitEvent{At: time.UnixMilli(e.At).UTC(), Reason: e.Reason, InUse: e.InUse, From: e.From, To: e.To, Reporter: e.Reporter})
	}
	return out, nil
}

// MinutePeak is the most leases of a provider/kind held at once during one
// minute, as seen by Acquire.
type MinutePeak struct {
	Minute time.Time `json:"minute"` // UTC, start of the minute
	Peak   int       `json:"peak"`
}

// ProviderStatus is one provider/kind's state.
type ProviderStatus struct {
	Provider        string `json:"provider"`
	Kind            string `json:"kind"`
	InUse           int    `json:"in_use"`
	ConfiguredLimit int    `json:"configured_limit"`
	EffectiveLimit  int    `json:"effective_limit"`
	// Learned says EffectiveLimit was learned from a vendor refusal.
	Learned bool `json:"learned"`
	// PeakPerMinute, oldest first, covers Config.PeakRetention.
	PeakPerMinute []MinutePeak `json:"peak_per_minute"`
}

// Status returns every configured provider/kind's state, sorted by
// provider then kind. It is an operator call and returns Redis errors.
func (l *Leases) Status(ctx context.Context) ([]ProviderStatus, error) {
	tags := make([]string, 0, len(l.cfg.Limits))
	for tag := range l.cfg.Limits {
		tags = append(tags, tag)
	}
	sort.Strings(tags)
	out := make([]ProviderStatus, 0, len(tags))
	for _, tag := range tags {
		pl := l.cfg.Limits[tag]
		octx, cancel := l.kit.Detached(ctx)
		vals, err := statusScript.Run(octx, l.kit.Client, []string{l.leasesKey(tag), l.limitKey(tag), l.peakKey(tag)}, l.nowArg()).Int64Slice()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("capacity: reading status of %s: %w", tag, err)
		}
		provider, kind := splitTag(tag)
		st := ProviderStatus{Provider: provider, Kind: kind, InUse: int(vals[0]), ConfiguredLimit: pl.Limit, EffectiveLimit: pl.Limit}
		switch {
		case vals[1] >= 0:
			st.EffectiveLimit, st.Learned = int(vals[1]), true
		case vals[2] >= 0:
			st.EffectiveLimit = int(vals[2])
		}
		for i := 3; i+1 < len(vals); i += 2 {
			st.PeakPerMinute = append(st.PeakPerMinute, MinutePeak{Minute: time.Unix(vals[i]*60, 0).UTC(), Peak: int(vals[i+1])})
		}
		slices.SortFunc(st.PeakPerMinute, func(a, b MinutePeak) int { return a.Minute.Compare(b.Minute) })
		out = append(out, st)
	}
	return out, nil
}

func splitTag(tag string) (provider, kind string) {
	for i := len(tag) - 1; i >= 0; i-- {
		if tag[i] == '/' {
			return tag[:i], tag[i+1:]
		}
	}
	return tag, ""
}
