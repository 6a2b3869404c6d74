// Package sleepers is the baseline callscribe is measured against: a
// client of independent per-worker sleepers, as most hand-written
// transcription workers are. Each worker takes a recording, submits it,
// and on a throttled answer sleeps for what that answer's Retry-After says
// (or a backoff) on its own, knowing nothing of the other workers, then
// submits again; accepted work is polled until done. It uses callscribe's
// own speech adapter, so the two differ only in how they admit requests.
//
// It is for tests, benchmarks and the demo's report, not for production.
package sleepers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// Item is one recording to transcribe.
type Item struct {
	// Key is the Idempotency-Key (the business key).
	Key, TenantID, CallID string
	AudioURL, AudioSHA256 string
	AudioBytes            int64
	// Provider, when set, is this item's speech adapter (its tenant's
	// account) instead of Config.Provider.
	Provider stt.Provider
}

// Config configures Run.
type Config struct {
	// Provider is the speech adapter (generic-http against a simulator).
	Provider stt.Provider
	// Workers is how many sleepers run at once.
	Workers int
	// RetryAfter decides each sleep from the answer's header, as
	// callscribe does; only no one else hears of it.
	RetryAfter retryafter.Policy
	// PollInterval is the wait between polls of accepted work.
	PollInterval time.Duration
	// MaxTries bounds the submissions of one recording. Default 50.
	MaxTries int
}

// Result is what a run cost.
type Result struct {
	Transcribed, Failed int
	// Submissions counts every submit request sent.
	Submissions int64
	Elapsed     time.Duration
}

// Run transcribes items with cfg.Workers sleepers and returns what it
// cost. It stops early only when ctx ends.
func Run(ctx context.Context, cfg Config, items []Item) (Result, error) {
	if cfg.MaxTries <= 0 {
		cfg.MaxTries = 50
	}
	start := time.Now()
	queue := make(chan Item)
	var subs atomic.Int64
	var mu sync.Mutex
	res := Result{}
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for it := range queue {
				ok := transcribe(ctx, cfg, it, &subs)
				mu.Lock()
				if ok {
					res.Transcribed++
				} else {
					res.Failed++
				}
				mu.Unlock()
			}
		})
	}
	for _, it := range items {
		select {
		case queue <- it:
		case <-ctx.Done():
		}
	}
	close(queue)
	wg.Wait()
	res.Submissions, res.Elapsed = subs.Load(), time.Since(start)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("sleepers: stopped: %w", err)
	}
	return res, nil
}

// transcribe is one sleeper's loop for one recording.
func transcribe(ctx context.Context, cfg Config, it Item, subs *atomic.Int64) bool {
	if it.Provider != nil {
		cfg.Provider = it.Provider
	}
	for try := range cfg.MaxTries {
		subs.Add(1)
		resp, err := cfg.Provider.Submit(ctx, stt.Request{IdempotencyKey: it.Key, TenantID: it.TenantID, CallID: it.CallID,
			AudioURL: it.AudioURL, AudioSHA256: it.AudioSHA256, AudioBytes: it.AudioBytes})
		if err != nil {
			if !clock.Sleep(ctx, cfg.RetryAfter.Decide("", false, try).Delay) {
				return false
			}
			continue
		}
		switch resp.Outcome {
		case stt.OutcomeCompleted:
			return true
		case stt.OutcomePending:
			return poll(ctx, cfg, resp.ProviderID)
		case stt.OutcomeThrottled:
			raw, present := "", resp.RetryAfter != nil
			if present {
				raw = *resp.RetryAfter
			}
			if !clock.Sleep(ctx, cfg.RetryAfter.Decide(raw, present, try).Delay) {
				return false
			}
		case stt.OutcomeTransient:
			if !clock.Sleep(ctx, cfg.RetryAfter.Decide("", false, try).Delay) {
				return false
			}
		default:
			return false
		}
	}
	return false
}

func poll(ctx context.Context, cfg Config, id string) bool {
	for {
		if !clock.Sleep(ctx, cfg.PollInterval) {
			return false
		}
		resp, err := cfg.Provider.Poll(ctx, id)
		if err != nil {
			continue
		}
		switch resp.Outcome {
		case stt.OutcomeCompleted:
			return true
		case stt.OutcomePending, stt.OutcomeThrottled, stt.OutcomeTransient:
			continue
		default:
			return false
		}
	}
}
