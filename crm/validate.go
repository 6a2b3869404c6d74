package crm

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Transcript is what validation needs to know of a transcript.
type Transcript struct {
	Text            string
	Language        string  // ISO 639-1, "" if unknown
	Confidence      float64 // 0..1; negative: the vendor reports none
	DurationSeconds float64 // as reported by the vendor
}

// Rules are a tenant's acceptance rules.
type Rules struct {
	// MinConfidence a transcript must reach (ignored when the vendor
	// reports no confidence).
	MinConfidence float64
	// Languages allowed; empty: any.
	Languages []string
	// AudioDuration is the recording's own length (from its header); zero:
	// unknown, not checked.
	AudioDuration time.Duration
	// DurationTolerance (a fraction) and DurationSlack bound how far the
	// reported duration may be from AudioDuration.
	DurationTolerance float64
	DurationSlack     time.Duration
}

// ValidationError says why a transcript was refused, in words a person can
// act on. Check names the rule.
type ValidationError struct {
	Check  string // "empty_text", "low_confidence", "language", "duration"
	Reason string
}

func (e *ValidationError) Error() string { return "transcript refused: " + e.Reason }

// Validate checks a transcript against a tenant's rules: non-empty text,
// confidence at or above the threshold, an allowed language, and a reported
// duration close to the audio's own.
func Validate(t Transcript, r Rules) error {
	if strings.TrimSpace(t.Text) == "" {
		return &ValidationError{Check: "empty_text", Reason: "the vendor returned no text (silent or unreadable audio?); listen to the recording and re-drive it with `callscribe jobs retry`"}
	}
	if t.Confidence >= 0 && t.Confidence < r.MinConfidence {
		return &ValidationError{Check: "low_confidence", Reason: fmt.Sprintf(
			"confidence %.2f is below the tenant's minimum %.2f; check the audio quality or lower min_confidence", t.Confidence, r.MinConfidence)}
	}
	if len(r.Languages) > 0 && !slices.Contains(r.Languages, t.Language) {
		lang := t.Language
		if lang == "" {
			lang = "unknown"
		}
		return &ValidationError{Check: "language", Reason: fmt.Sprintf(
			"language %s is not among the tenant's languages %v; set the recording's language or add it to the tenant", lang, r.Languages)}
	}
	if r.AudioDuration > 0 {
		audio := r.AudioDuration.Seconds()
		allowed := audio*r.DurationTolerance + r.DurationSlack.Seconds()
		if math.Abs(t.DurationSeconds-audio) > allowed {
			return &ValidationError{Check: "duration", Reason: fmt.Sprintf(
				"the vendor reports %.1fs of audio but the recording lasts %.1fs (allowed ±%.1fs): the vendor may have transcribed a truncated or different file",
				t.DurationSeconds, audio, allowed)}
		}
	}
	return nil
}
