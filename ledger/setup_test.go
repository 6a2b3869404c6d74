package ledger_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/ledger"
)

type bundle struct {
	pool   *pgxpool.Pool
	ledger *ledger.Ledger
	// clock starts at a fixed instant and moves one millisecond per
	// reading, so every event has a distinct, predictable time.
	clock *clock.Stub
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := testdb.New(t)
	c := clock.NewStepping(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), time.Millisecond)
	l, err := ledger.New(pool, &ledger.Config{Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{pool: pool, ledger: l, clock: c}
}

var callSeq atomic.Int64

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// newRecording returns a NewRecording with a call id no other test uses.
func newRecording() ledger.NewRecording {
	n := callSeq.Add(1)
	return ledger.NewRecording{
		TenantID:    "acme",
		CallID:      fmt.Sprintf("call-%d", n),
		AudioSHA256: digest(fmt.Sprintf("audio-%d", n)),
		Lane:        ledger.LaneBatch,
		AudioURI:    "file:///recordings/a.wav",
		AudioBytes:  1024,
	}
}

func (b *bundle) ingest(t *testing.T) ledger.Recording {
	t.Helper()
	res, err := b.ledger.Ingest(context.Background(), newRecording())
	if err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	return res.Recording
}

// walk moves a recording along the given states, failing the test on error.
func (b *bundle) walk(t *testing.T, r ledger.Recording, to ...ledger.State) ledger.Recording {
	t.Helper()
	for _, s := range to {
		var err error
		r, err = b.ledger.Transition(context.Background(), ledger.Transition{RecordingID: r.ID, From: r.State, To: s, Reason: "test"})
		if err != nil {
			t.Fatalf("walk to %s: %v", s, err)
		}
	}
	return r
}
