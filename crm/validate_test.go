package crm_test

import (
	"errors"
	"testing"
	"time"

	"github.com/callscribe/callscribe/crm"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	rules := crm.Rules{MinConfidence: 0.6, Languages: []string{"en", "es"}, AudioDuration: 10 * time.Second,
		DurationTolerance: 0.1, DurationSlack: time.Second}
	good := crm.Transcript{Text: "rate sheet by Friday", Language: "en", Confidence: 0.9, DurationSeconds: 10.4}
	tests := []struct {
		name  string
		edit  func(*crm.Transcript, *crm.Rules)
		check string
	}{
		{"good", func(*crm.Transcript, *crm.Rules) {}, ""},
		{"blank text", func(t *crm.Transcript, _ *crm.Rules) { t.Text = " \n" }, "empty_text"},
		{"low confidence", func(t *crm.Transcript, _ *crm.Rules) { t.Confidence = 0.59 }, "low_confidence"},
		{"at the threshold", func(t *crm.Transcript, _ *crm.Rules) { t.Confidence = 0.6 }, ""},
		{"no confidence reported", func(t *crm.Transcript, _ *crm.Rules) { t.Confidence = -1 }, ""},
		{"wrong language", func(t *crm.Transcript, _ *crm.Rules) { t.Language = "de" }, "language"},
		{"unknown language", func(t *crm.Transcript, _ *crm.Rules) { t.Language = "" }, "language"},
		{"any language", func(t *crm.Transcript, r *crm.Rules) { t.Language = "de"; r.Languages = nil }, ""},
		{"too short", func(t *crm.Transcript, _ *crm.Rules) { t.DurationSeconds = 7.9 }, "duration"},
		{"within tolerance", func(t *crm.Transcript, _ *crm.Rules) { t.DurationSeconds = 8.1 }, ""},
		{"too long", func(t *crm.Transcript, _ *crm.Rules) { t.DurationSeconds = 12.1 }, "duration"},
		{"audio length unknown", func(t *crm.Transcript, r *crm.Rules) { t.DurationSeconds = 99; r.AudioDuration = 0 }, ""},
	}
	for _, tt := range tests {
		tr, r := good, rules
		tt.edit(&tr, &r)
		err := crm.Validate(tr, r)
		var ve *crm.ValidationError
		switch {
		case tt.check == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tt.name, err)
		case tt.check != "" && (!errors.As(err, &ve) || ve.Check != tt.check):
			t.Errorf("%s: %v, want refused by %s", tt.name, err, tt.check)
		}
	}
}
