package stt

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestNormalizeLanguage(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"english": "en", "English": "en", " ENGLISH ": "en", "german": "de", "haitian creole": "ht",
		"cantonese": "yue", "hawaiian": "haw", "javanese": "jv", "myanmar": "my", "burmese": "my",
		"castilian": "es", "mandarin": "zh", "flemish": "nl",
		"en": "en", "EN": "en", "en-US": "en", "en_us": "en", "de-CH": "de", "nl-BE": "nl", "pt-BR": "pt",
		"jw": "jv", "iw": "he", "yue": "yue", "haw": "haw", "zh-Hant-TW": "zh",
		"": "", "   ": "", "klingon": "", "e": "", "eng": "", "12": "", "e1": "", "en-": "en", "-en": "",
	} {
		if got := normalizeLanguage(in); got != want {
			t.Errorf("normalizeLanguage(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWhisperLanguageTable: the table covers Whisper's languages, with
// unique names and codes, every code a lower-case ISO 639-1 (or, where
// none exists, 639-3) code.
func TestWhisperLanguageTable(t *testing.T) {
	t.Parallel()
	if n := len(whisperLanguages); n < 99 {
		t.Errorf("%d languages, want Whisper's 99 and more", n)
	}
	names, codes := map[string]bool{}, map[string]bool{}
	for _, l := range whisperLanguages {
		if names[l.name] || codes[l.code] {
			t.Errorf("duplicate %q / %q", l.name, l.code)
		}
		names[l.name], codes[l.code] = true, true
		if l.name != strings.ToLower(l.name) || strings.TrimSpace(l.name) != l.name {
			t.Errorf("name %q is not lower case and trimmed", l.name)
		}
		if len(l.code) != 2 && l.code != "haw" && l.code != "yue" || strings.ToLower(l.code) != l.code {
			t.Errorf("code %q is not a lower-case ISO 639-1 code", l.code)
		}
	}
	for alias, code := range languageNameAliases {
		if names[alias] || !codes[code] {
			t.Errorf("alias %q → %q: shadows a name or names no code", alias, code)
		}
	}
}

// TestLanguageRoundTrip: name → code → name and code → name → code are
// identities over the table, whatever the name's case and padding.
func TestLanguageRoundTrip(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		l := rapid.SampledFrom(whisperLanguages[:]).Draw(t, "language")
		spelled := []rune(l.name)
		for i := range spelled {
			if rapid.Bool().Draw(t, "upper") {
				spelled[i] = []rune(strings.ToUpper(string(spelled[i])))[0]
			}
		}
		pad := rapid.SampledFrom([]string{"", " ", "\t", "  "})
		name := pad.Draw(t, "before") + string(spelled) + pad.Draw(t, "after")

		code := languageCode(name)
		if code != l.code {
			t.Fatalf("languageCode(%q) = %q, want %q", name, code, l.code)
		}
		if back := languageName(code); back != l.name {
			t.Fatalf("languageName(%q) = %q, want %q", code, back, l.name)
		}
		if again := languageCode(languageName(l.code)); again != l.code {
			t.Fatalf("code %q round-trips to %q", l.code, again)
		}
		if got := normalizeLanguage(name); got != l.code {
			t.Fatalf("normalizeLanguage(%q) = %q, want %q", name, got, l.code)
		}
		if got := normalizeLanguage(l.code); got != l.code {
			t.Fatalf("normalizeLanguage(%q) = %q: a code must be kept", l.code, got)
		}
	})
}

// TestNormalizeLanguageTotal: any input gives "" or a code from the table
// or a two-letter code, and normalising is idempotent.
func TestNormalizeLanguageTotal(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(
			rapid.String(),
			rapid.StringMatching(`[A-Za-z]{1,4}([-_][A-Za-z0-9]{1,8}){0,2}`),
		).Draw(t, "s")
		got := normalizeLanguage(s)
		if got == "" {
			return
		}
		if _, known := nameByCode[got]; !known && (len(got) != 2 || strings.ToLower(got) != got) {
			t.Fatalf("normalizeLanguage(%q) = %q, not a code", s, got)
		}
		if again := normalizeLanguage(got); again != got {
			t.Fatalf("normalizeLanguage is not idempotent: %q → %q → %q", s, got, again)
		}
	})
}
