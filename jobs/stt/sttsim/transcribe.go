package sttsim

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"
)

// SubmitRequest is one recording to transcribe, as the server accepted it:
// a single submission or one item of a batch.
type SubmitRequest struct {
	IdempotencyKey string
	AudioURL       string
	AudioSHA256    string
	Model          string          // ModelDefault when the request named none
	Language       string          // "" means auto-detect
	TenantID       string          // "" when absent
	Metadata       json.RawMessage // as sent, nil when absent; echoed, never interpreted
	// Audio is the header of file:// audio; nil for http(s) audio, which
	// the server does not fetch.
	Audio *WAVInfo
}

// Result is what a transcriber returns for a SubmitRequest.
type Result struct {
	Text       string
	Language   string // "" means the request's language, or "en"
	Confidence float64
	Duration   time.Duration
	Segments   []Segment
}

// Segment is a timed part of a Result's text.
type Segment struct {
	Start, End time.Duration
	Text       string
	Confidence float64
}

// check refuses a Result that cannot be written as JSON.
func (r Result) check() error {
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	if !finite(r.Confidence) {
		return errors.New("transcriber returned a non-finite confidence")
	}
	for _, s := range r.Segments {
		if !finite(s.Confidence) {
			return errors.New("transcriber returned a segment with a non-finite confidence")
		}
	}
	return nil
}

// DefaultTranscriber is the transcriber a Server uses when
// Config.Transcribe is nil. Its Result is deterministic:
//
//   - text: expected[audio_sha256] if present, else two or three sentences
//     of a freight call picked by the digest (they mention a rate sheet, a
//     pickup window or a next call, for action extraction to find);
//   - duration: the WAV header's for file:// audio, else 8 to 58 seconds
//     picked by the digest;
//   - language: the request's, or "en" when it asks for auto-detection;
//   - confidence ConfidenceDefault; one segment per sentence, timed in
//     proportion to its words.
func DefaultTranscriber(expected map[string]string) func(SubmitRequest) (Result, error) {
	return func(req SubmitRequest) (Result, error) {
		digest, _ := hex.DecodeString(req.AudioSHA256) // validated by the server; a bad one gives zeros
		digest = append(digest, make([]byte, 8)...)
		sha := strings.ToLower(req.AudioSHA256)
		text, ok := expected[sha]
		if !ok {
			text = sentenceFor(digest)
		}
		var dur time.Duration
		if req.Audio != nil {
			dur = req.Audio.Duration
		} else {
			dur = 8*time.Second + time.Duration(digest[0]%50)*time.Second + time.Duration(digest[1]%10)*100*time.Millisecond
		}
		lang := req.Language
		if lang == "" {
			lang = "en"
		}
		return Result{
			Text:       text,
			Language:   lang,
			Confidence: ConfidenceDefault,
			Duration:   dur,
			Segments:   segmentsFor(text, dur, ConfidenceDefault),
		}, nil
	}
}

var (
	openings = []string{
		"Hi, this is Dana from Northline Freight.",
		"Good morning, this is Sam at Harbor Logistics.",
		"Hello, Priya from Summit Carriers here.",
		"Hi, it's Marco with Bluewater Transport.",
	}
	middles = []string{
		"I'm calling about the pickup window for Thursday's load.",
		"We need to move the pickup window to between two and four.",
		"The shipment to Denver is ready at the dock.",
		"Your driver checked in late, so we rebooked the delivery.",
	}
	closings = []string{
		"I'll send you the updated rate sheet by end of day.",
		"Let's talk again on Monday at ten.",
		"Can you call me back tomorrow morning?",
		"",
	}
)

// sentenceFor picks a short call from the first bytes of digest (at least
// three).
func sentenceFor(digest []byte) string {
	parts := []string{
		openings[int(digest[0])%len(openings)],
		middles[int(digest[1])%len(middles)],
	}
	if c := closings[int(digest[2])%len(closings)]; c != "" {
		parts = append(parts, c)
	}
	return strings.Join(parts, " ")
}

// segmentsFor splits text into sentences and spreads dur over them in
// proportion to their words.
func segmentsFor(text string, dur time.Duration, confidence float64) []Segment {
	var sentences []string
	rest := strings.TrimSpace(text)
	for rest != "" {
		i := strings.IndexAny(rest, ".?!")
		if i < 0 {
			sentences = append(sentences, rest)
			break
		}
		sentences = append(sentences, strings.TrimSpace(rest[:i+1]))
		rest = strings.TrimSpace(rest[i+1:])
	}
	words := 0
	for _, s := range sentences {
		words += len(strings.Fields(s))
	}
	segs := make([]Segment, 0, len(sentences))
	var start time.Duration
	seen := 0
	for i, s := range sentences {
		seen += len(strings.Fields(s))
		end := time.Duration(float64(dur) * float64(seen) / float64(max(words, 1)))
		if i == len(sentences)-1 {
			end = dur
		}
		segs = append(segs, Segment{Start: start, End: end, Text: s, Confidence: confidence})
		start = end
	}
	return segs
}
