package capacity

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Warning is an event of live-call capacity an operator should see: a
// call connected over its transcribers' limit, for one.
type Warning struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Subject string    `json:"subject"`
	Detail  string    `json:"detail"`
}

func (l *Leases) warningsKey() string { return l.kit.Key("warnings", "recent") }

// RecordWarning appends w (At defaults to now) to the recent warnings.
// Like every capacity call it fails open: without Redis the warning is
// only logged.
func (l *Leases) RecordWarning(ctx context.Context, w Warning) {
	if w.At.IsZero() {
		w.At = time.Now().UTC()
	}
	b, err := json.Marshal(w)
	if err == nil {
		octx, cancel := l.kit.Detached(ctx)
		defer cancel()
		pipe := l.kit.Client.TxPipeline()
		pipe.LPush(octx, l.warningsKey(), b)
		pipe.LTrim(octx, l.warningsKey(), 0, WarningsKept-1)
		_, err = pipe.Exec(octx)
	}
	if err != nil {
		l.fail.Note("recording a warning", err)
	}
}

// Warnings returns up to n recent warnings, newest first.
func (l *Leases) Warnings(ctx context.Context, n int) ([]Warning, error) {
	raw, err := l.kit.Client.LRange(ctx, l.warningsKey(), 0, int64(n)-1).Result()
	if err != nil {
		return nil, fmt.Errorf("capacity: reading the recent warnings: %w", err)
	}
	out := make([]Warning, 0, len(raw))
	for _, r := range raw {
		var w Warning
		if json.Unmarshal([]byte(r), &w) == nil {
			out = append(out, w)
		}
	}
	return out, nil
}
