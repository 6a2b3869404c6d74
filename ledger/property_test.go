package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/ledger"
)

// Random transition sequences against a model: Go refuses every illegal
// edge, the database refuses it too when Go is bypassed, stale callers lose
// the compare-and-set, and replaying the history reproduces the row.
func TestTransitionsAgainstModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	states := ledger.States()

	rapid.Check(t, func(rt *rapid.T) {
		rec, err := b.ledger.Ingest(ctx, newRecording())
		if err != nil {
			rt.Fatal(err)
		}
		id := rec.Recording.ID
		model := struct {
			state   ledger.State
			attempt int
			seq     int
		}{ledger.StateReceived, 0, 1}

		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for range steps {
			if rapid.IntRange(0, 5).Draw(rt, "note") == 0 {
				resubmit := model.state == ledger.StateSubmitted && rapid.Bool().Draw(rt, "resubmit")
				got, err := b.ledger.Note(ctx, ledger.Note{RecordingID: id, State: model.state, Reason: "note", Submission: resubmit})
				if err != nil {
					rt.Fatalf("note in %s: %v", model.state, err)
				}
				model.seq++
				if resubmit {
					model.attempt++
				}
				if got.State != model.state || got.Attempt != model.attempt || got.EventSeq != model.seq {
					rt.Fatalf("after note: row %+v, model %+v", got.Snapshot(), model)
				}
				continue
			}
			if rapid.IntRange(0, 4).Draw(rt, "advance") == 0 {
				// A move of several steps in one statement (AdvanceTx):
				// legal chains move the model a step per event, others
				// are refused by Go and, bypassing Go, by the database.
				k := rapid.IntRange(1, 4).Draw(rt, "advance_steps")
				chain := make([]ledger.Transition, k)
				legal, transcribed, from := true, false, model.state
				for i := range chain {
					to := rapid.SampledFrom(states).Draw(rt, "advance_to")
					chain[i] = ledger.Transition{From: from, To: to, Reason: "property advance"}
					legal = legal && ledger.CanTransition(from, to)
					transcribed = transcribed || to == ledger.StateTranscribed
					from = to
				}
				a := ledger.Advance{RecordingID: id, Steps: chain}
				if transcribed {
					a.Transcript = &ledger.Transcript{Provider: "p", Text: "t", Confidence: 1}
				}
				var got ledger.Recording
				err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
					var err error
					got, err = b.ledger.AdvanceTx(ctx, tx, a)
					return err
				})
				if !legal {
					if !errors.Is(err, ledger.ErrIllegalTransition) {
						rt.Fatalf("advance %v: err = %v, want ErrIllegalTransition", chain, err)
					}
					submissions := 0
					for _, st := range chain {
						if st.To == ledger.StateSubmitted && st.From != st.To {
							submissions++
						}
					}
					evs := make([]rawEvent, len(chain))
					attempt := model.attempt
					for i, st := range chain {
						if st.To == ledger.StateSubmitted && st.From != st.To {
							attempt++
						}
						// At the row's updated_at, which the raw UPDATE
						// leaves alone: the history replays to the row.
						evs[i] = rawEvent{prior: string(st.From), next: string(st.To), attempt: attempt}
					}
					dbErr := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
						return rawMove(ctx, tx, id, model.seq, string(from), k, submissions, evs)
					})
					// The database takes any history of edges and notes
					// (an event that keeps the state), and nothing else.
					valid := true
					for _, st := range chain {
						valid = valid && (st.From == st.To || ledger.CanTransition(st.From, st.To))
					}
					switch {
					case valid && dbErr != nil:
						rt.Fatalf("raw SQL advance %v (edges and notes): %v", chain, dbErr)
					case valid:
						model.state, model.seq, model.attempt = from, model.seq+k, model.attempt+submissions
					case sqlState(dbErr) != "CS001":
						rt.Fatalf("raw SQL advance %v: err = %v, want CS001", chain, dbErr)
					}
					continue
				}
				if err != nil {
					rt.Fatalf("advance %v: %v", chain, err)
				}
				for _, st := range chain {
					if st.To == ledger.StateSubmitted {
						model.attempt++
					}
				}
				model.state, model.seq = from, model.seq+k
				if got.State != model.state || got.Attempt != model.attempt || got.EventSeq != model.seq {
					rt.Fatalf("after advance %v: row %+v, model %+v", chain, got.Snapshot(), model)
				}
				continue
			}
			to := rapid.SampledFrom(states).Draw(rt, "to")
			from := model.state
			if rapid.IntRange(0, 4).Draw(rt, "stale") == 0 {
				from = rapid.SampledFrom(states).Draw(rt, "from")
			}
			got, err := b.ledger.Transition(ctx, ledger.Transition{RecordingID: id, From: from, To: to, Reason: "property"})
			switch {
			case !ledger.CanTransition(from, to):
				if !errors.Is(err, ledger.ErrIllegalTransition) {
					rt.Fatalf("%s -> %s: err = %v, want ErrIllegalTransition", from, to, err)
				}
				if from == model.state && from != to { // (X -> X is a note, see Note)
					// Bypass Go: the database must refuse the same edge.
					dbErr := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
						return rawMove(ctx, tx, id, model.seq, string(to), 1, 0,
							[]rawEvent{{prior: string(from), next: string(to), attempt: model.attempt}})
					})
					if sqlState(dbErr) != "CS001" {
						rt.Fatalf("raw SQL %s -> %s: err = %v, want CS001", from, to, dbErr)
					}
				}
			case from != model.state:
				var sce *ledger.StateConflictError
				if !errors.As(err, &sce) || sce.Actual != model.state {
					rt.Fatalf("stale %s -> %s (row in %s): err = %v, want StateConflictError", from, to, model.state, err)
				}
			default:
				if err != nil {
					rt.Fatalf("%s -> %s: %v", from, to, err)
				}
				model.state, model.seq = to, model.seq+1
				if to == ledger.StateSubmitted {
					model.attempt++
				}
				if got.State != model.state || got.Attempt != model.attempt || got.EventSeq != model.seq {
					rt.Fatalf("row %+v, model %+v", got.Snapshot(), model)
				}
			}
		}

		row, err := b.ledger.Recording(ctx, id)
		if err != nil {
			rt.Fatal(err)
		}
		if row.State != model.state || row.Attempt != model.attempt || row.EventSeq != model.seq {
			rt.Fatalf("row %+v, model %+v", row.Snapshot(), model)
		}
		evs, err := b.ledger.Events(ctx, id)
		if err != nil {
			rt.Fatal(err)
		}
		snap, err := ledger.Replay(evs)
		if err != nil {
			rt.Fatalf("history does not replay: %v", err)
		}
		if snap != row.Snapshot() {
			rt.Fatalf("replay %+v != row %+v", snap, row.Snapshot())
		}
	})
}

// Replay refuses histories that are not complete and legal.
func TestReplayRefusesBrokenChains(t *testing.T) {
	t.Parallel()
	ok := []ledger.Event{
		{Seq: 1, New: ledger.StateReceived},
		{Seq: 2, Prior: ledger.StateReceived, New: ledger.StateEligible},
		{Seq: 3, Prior: ledger.StateEligible, New: ledger.StateSubmitted, Attempt: 1},
	}
	if _, err := ledger.Replay(ok); err != nil {
		t.Fatal(err)
	}
	broken := map[string]func([]ledger.Event){
		"gap":            func(e []ledger.Event) { e[2].Seq = 4 },
		"wrong start":    func(e []ledger.Event) { e[0].New = ledger.StateEligible },
		"prior mismatch": func(e []ledger.Event) { e[2].Prior = ledger.StateReceived },
		"illegal edge":   func(e []ledger.Event) { e[2].New = ledger.StateCommitted; e[2].Attempt = 0 },
		"attempt skew":   func(e []ledger.Event) { e[2].Attempt = 2 },
	}
	for name, breakIt := range broken {
		evs := append([]ledger.Event(nil), ok...)
		breakIt(evs)
		if _, err := ledger.Replay(evs); err == nil {
			t.Errorf("%s: Replay accepted a broken chain", name)
		}
	}
	if _, err := ledger.Replay(nil); err == nil {
		t.Error("Replay accepted an empty history")
	}
}
