package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Transcript is a recording's transcription as the vendor returned it.
// Its text is personal data: the ledger stores it and never logs it.
type Transcript struct {
	RecordingID     uuid.UUID
	Provider        string
	ProviderID      string
	Text            string
	Language        string
	Confidence      float64 // 0..1, or -1 when the vendor gives none
	DurationSeconds float64
	Segments        []Segment
	CreatedAt       time.Time
}

// Segment is a timed piece of a transcript.
type Segment struct {
	Start      float64 `json:"start"`
	End        float64 `json:"end"`
	Text       string  `json:"text"`
	Confidence float64 `json:"confidence"`
}

// RecordTranscript stores tr and applies t (submitted -> transcribed) in
// one transaction: a recording is transcribed exactly when its transcript
// exists.
func (l *Ledger) RecordTranscript(ctx context.Context, t Transition, tr Transcript) (Recording, error) {
	var rec Recording
	err := l.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		rec, err = l.RecordTranscriptTx(ctx, tx, t, tr)
		return err
	})
	return rec, err
}

// RecordTranscriptTx is RecordTranscript inside the caller's transaction.
func (l *Ledger) RecordTranscriptTx(ctx context.Context, tx pgx.Tx, t Transition, tr Transcript) (Recording, error) {
	if t.To != StateTranscribed {
		return Recording{}, &InvalidError{Field: "Transition.To", Reason: fmt.Sprintf("a transcript goes with a move to %s, not %s", StateTranscribed, t.To)}
	}
	return l.AdvanceTx(ctx, tx, Advance{RecordingID: t.RecordingID, Steps: []Transition{t}, Transcript: &tr})
}

// Transcript returns a recording's transcript, or ErrNotFound.
func (l *Ledger) Transcript(ctx context.Context, recordingID uuid.UUID) (Transcript, error) {
	r, err := l.queries.TranscriptGet(ctx, l.pool, recordingID)
	if err != nil {
		return Transcript{}, fmt.Errorf("reading transcript of %s: %w", recordingID, translate(err))
	}
	var segs []Segment
	if err := json.Unmarshal(r.Segments, &segs); err != nil {
		return Transcript{}, fmt.Errorf("reading transcript of %s: segments: %w", recordingID, err)
	}
	return Transcript{
		RecordingID: r.RecordingID, Provider: r.Provider, ProviderID: r.ProviderID, Text: r.Text, Language: r.Language,
		Confidence: r.Confidence, DurationSeconds: r.DurationSeconds, Segments: segs, CreatedAt: r.CreatedAt.UTC(),
	}, nil
}
