package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox"
)

// commitSets commits n recordings of tenant, each with one action set,
// straight through the ledger and the outbox (ingested, walked to
// validated, committed), without the speech pipeline: what a replay run
// replays. The outbox has no destination, so nothing is delivered. It
// returns the sets' idempotency keys (tenant:call:version).
func commitSets(t *testing.T, pool *pgxpool.Pool, tenant string, n int) []string {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.New(outbox.Config{}, pool, l)
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	o.AddWorkers(workers)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(i int) (string, error) {
		call := fmt.Sprintf("call-%04d", i)
		h := sha256.Sum256(fmt.Appendf(nil, "%s/%s", tenant, call))
		res, err := l.Ingest(ctx, ledger.NewRecording{TenantID: tenant, CallID: call, AudioSHA256: hex.EncodeToString(h[:])})
		if err != nil {
			return "", err
		}
		r := res.Recording
		for _, s := range []ledger.State{ledger.StateEligible, ledger.StateSubmitted, ledger.StateTranscribed, ledger.StateValidated} {
			if r, err = l.Transition(ctx, ledger.Transition{RecordingID: r.ID, From: r.State, To: s}); err != nil {
				return "", err
			}
		}
		c, err := o.Commit(ctx, client, r, []crm.Action{
			{Kind: crm.KindCallNote, Text: "Call " + call + ": rate sheet promised"},
			{Kind: crm.KindNextCall, Date: "2026-12-02"},
		})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s:%s:%d", tenant, call, c.Set.ActionVersion), nil
	}
	keys := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	const parallel = 8
	for w := range parallel {
		wg.Go(func() {
			for i := w; i < n; i += parallel {
				keys[i], errs[i] = commit(i)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("committing recording %d of %d: %v", i, n, err)
		}
	}
	return keys
}

// replayWindow is a --from, --to window holding every recording ingested
// now.
func replayWindow() (from, to string) {
	now := time.Now().UTC()
	return now.Add(-24 * time.Hour).Format(time.DateOnly), now.Add(48 * time.Hour).Format(time.DateOnly)
}
