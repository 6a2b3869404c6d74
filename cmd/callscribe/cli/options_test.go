package cli

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/ingest"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// Each command's options accept good flags and refuse a bad one with an
// error naming the flag (or argument) at fault, before anything is opened.
func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	targets := map[string]config.CRMConfig{"staging": {}}
	replay := func(edit func(*replayOptions)) *replayOptions {
		o := &replayOptions{from: "2026-01-01", to: "2026-02-01", target: "staging", state: "committed", targets: targets}
		if edit != nil {
			edit(o)
		}
		return o
	}
	one := ingest.Item{TenantID: "t", CallID: "c", Audio: "a.wav"}
	for _, c := range []struct {
		name      string
		good, bad validator
		want      string // in bad's error
	}{
		{"serve", serveOptions{addr: "127.0.0.1:0"}, serveOptions{}, "--addr"},
		{"scopes audit", auditOptions{since: time.Hour}, auditOptions{since: -time.Hour}, "--since -1h0m0s: want a positive duration"},
		{"batches list", batchesListOptions{state: "formed", limit: 10}, batchesListOptions{state: "cooking"}, `--state "cooking"`},
		{"batches list --limit", batchesListOptions{}, batchesListOptions{limit: -1}, "--limit -1"},
		{"batches show", batchesShowOptions{manifest: "key-1"}, batchesShowOptions{}, "ID|KEY"},
		{"caller-ids", callerIDsOptions{org: "acme"}, callerIDsOptions{}, "--org"},
		{"capacity set-limit", &setLimitOptions{limitArg: "8"}, &setLimitOptions{limitArg: "-1"}, `LIMIT "-1"`},
		{"ingest", &ingestOptions{one: one, deadline: "2026-11-30T18:00:00Z"}, &ingestOptions{one: one, deadline: "tonight"}, `--deadline "tonight": want RFC 3339`},
		{"ingest --action-deadline", &ingestOptions{manifest: "m.jsonl"}, &ingestOptions{one: one, actionDeadline: "tomorrow"}, `--action-deadline "tomorrow": want RFC 3339`},
		{"ingest required", &ingestOptions{one: one}, &ingestOptions{one: ingest.Item{TenantID: "t"}}, "give --tenant, --call and --audio, or --manifest"},
		{"jobs show", jobsShowOptions{tenant: "t", call: "c"}, jobsShowOptions{tenant: "t"}, "--call"},
		{"jobs list", jobsListOptions{state: "committed"}, jobsListOptions{state: "done"}, `--state "done" is not a state`},
		{"jobs list --limit", jobsListOptions{limit: 5}, jobsListOptions{limit: -5}, "--limit -5"},
		{"jobs retry", &redriveOptions{recording: "0190a8c4-7d3e-7c6a-9d1b-2f4e5a6b7c8d"}, &redriveOptions{recording: "r-1"}, `recording id "r-1"`},
		{"scopes window", scopeOptions{scope: "stt:acme"}, scopeOptions{}, "SCOPE"},
		{"migrate down", migrateDownOptions{all: true}, nil, ""},
		{"retention run", retentionOptions{dryRun: true}, nil, ""},
		{"outbox list", outboxListOptions{state: "dead"}, outboxListOptions{state: "lost"}, `--state "lost"`},
		{"outbox retry", &outboxRetryOptions{row: "42"}, &outboxRetryOptions{row: "forty-two"}, `outbox id "forty-two"`},
		{"replay", replay(nil), replay(func(o *replayOptions) { o.target = "" }), "give --from, --to and --target"},
		{"replay --from", replay(nil), replay(func(o *replayOptions) { o.from = "yesterday" }), "--from"},
		{"replay --to", replay(nil), replay(func(o *replayOptions) { o.to = "2025-12-01" }), "--to 2025-12-01 is not after --from"},
		{"replay --target", replay(nil), replay(func(o *replayOptions) { o.target = "prod" }), `--target "prod" is not in crm_targets (configured: staging)`},
		{"replay --max-rate", replay(func(o *replayOptions) { o.maxRate = 50 }), replay(func(o *replayOptions) { o.maxRate = -3 }), "--max-rate -3"},
		{"replay --state", replay(nil), replay(func(o *replayOptions) { o.state = "done" }), `--state "done"`},
		{"replay status", &replayStatusOptions{run: []string{"7"}}, &replayStatusOptions{run: []string{"x"}}, `run "x"`},
		{"replay status --limit", &replayStatusOptions{}, &replayStatusOptions{limit: -1}, "--limit -1"},
		{"replay resume", &replayResumeOptions{run: "7"}, &replayResumeOptions{run: "0"}, `run "0"`},
		{"replay cancel", &replayCancelOptions{run: "7"}, &replayCancelOptions{run: ""}, `run ""`},
		{"rollout set", rolloutSetOptions{cohort: "early", mode: "enforce"}, rolloutSetOptions{cohort: "early", mode: "sometimes"}, "observe or enforce"},
		{"rollout report", rolloutReportOptions{since: time.Hour}, rolloutReportOptions{}, "--since 0s"},
		{"simulate stt", simulateSTTOptions{addr: "127.0.0.1:0", cfg: sttsim.Config{AsyncShare: 0.3}}, simulateSTTOptions{addr: "127.0.0.1:0", cfg: sttsim.Config{AsyncShare: 1.5}}, "--async-share 1.5"},
		{"simulate stt NaN", simulateSTTOptions{addr: "127.0.0.1:0"}, simulateSTTOptions{addr: "127.0.0.1:0", cfg: sttsim.Config{RateLimitShare: math.NaN()}}, "--rate-limit-share NaN"},
		{"simulate stt --addr", simulateSTTOptions{addr: "127.0.0.1:8090"}, simulateSTTOptions{}, "--addr"},
		{"tokens create", tokensCreateOptions{admin: true}, tokensCreateOptions{tenant: "acme", admin: true}, "not both"},
		{"tokens create none", tokensCreateOptions{tenant: "acme"}, tokensCreateOptions{}, "--tenant T or --admin"},
		{"tokens list", tokensListOptions{json: true}, nil, ""},
		{"tokens revoke", &tokensRevokeOptions{token: "3"}, &tokensRevokeOptions{token: "-3"}, `"-3" is not a token id`},
		{"worker", workerOptions{metricsAddr: "127.0.0.1:9100"}, workerOptions{metricsAddr: "0.0.0.0:9100"}, "--metrics-addr 0.0.0.0:9100: a loopback address only"},
	} {
		if err := c.good.Validate(); err != nil {
			t.Errorf("%s: good options refused: %v", c.name, err)
		}
		if c.bad == nil {
			continue // only switches: nothing to refuse
		}
		if err := c.bad.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: bad options: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

// Validate parses what it checks, for RunE to use.
func TestOptionsValidateParses(t *testing.T) {
	t.Parallel()
	o := &ingestOptions{one: ingest.Item{TenantID: "t", CallID: "c", Audio: "a.wav"}, deadline: "2026-11-30T18:00:00Z", actionDeadline: "2026-11-30T17:00:00Z"}
	if err := o.Validate(); err != nil || o.one.Deadline == nil || o.one.ActionDeadline == nil ||
		!o.one.Deadline.Equal(time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)) || !o.one.ActionDeadline.Equal(time.Date(2026, 11, 30, 17, 0, 0, 0, time.UTC)) {
		t.Errorf("ingest: %v, deadline %v, action deadline %v", err, o.one.Deadline, o.one.ActionDeadline)
	}
	r := &replayOptions{from: "2026-01-01", to: "2026-02-01T12:00:00Z", target: "staging", targets: map[string]config.CRMConfig{"staging": {}}}
	if err := r.Validate(); err != nil || !r.fromTime.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) || !r.toTime.Equal(time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("replay: %v, from %v, to %v", err, r.fromTime, r.toTime)
	}
	l := &setLimitOptions{limitArg: "8"}
	if err := l.Validate(); err != nil || l.limit != 8 {
		t.Errorf("capacity set-limit: %v, limit %d", err, l.limit)
	}
	s := &replayStatusOptions{run: []string{"12"}}
	if err := s.Validate(); err != nil || s.id != 12 {
		t.Errorf("replay status: %v, id %d", err, s.id)
	}
	tok := &tokensRevokeOptions{token: "5"}
	if err := tok.Validate(); err != nil || tok.id != 5 {
		t.Errorf("tokens revoke: %v, id %d", err, tok.id)
	}
}
