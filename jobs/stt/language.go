package stt

import "strings"

// whisperLanguages are the languages Whisper transcribes, as OpenAI's
// verbose_json names them (lower-case English names), with their ISO 639-1
// codes, in Whisper's order (openai/whisper, whisper/tokenizer.py). Two
// differ from Whisper's own codes: Javanese is "jv" (Whisper says "jw",
// withdrawn from ISO 639-1 in 2001), and Hawaiian and Cantonese, which have
// no ISO 639-1 code, keep their ISO 639-3 codes "haw" and "yue".
var whisperLanguages = [...]struct{ code, name string }{
	{"en", "english"}, {"zh", "chinese"}, {"de", "german"}, {"es", "spanish"},
	{"ru", "russian"}, {"ko", "korean"}, {"fr", "french"}, {"ja", "japanese"},
	{"pt", "portuguese"}, {"tr", "turkish"}, {"pl", "polish"}, {"ca", "catalan"},
	{"nl", "dutch"}, {"ar", "arabic"}, {"sv", "swedish"}, {"it", "italian"},
	{"id", "indonesian"}, {"hi", "hindi"}, {"fi", "finnish"}, {"vi", "vietnamese"},
	{"he", "hebrew"}, {"uk", "ukrainian"}, {"el", "greek"}, {"ms", "malay"},
	{"cs", "czech"}, {"ro", "romanian"}, {"da", "danish"}, {"hu", "hungarian"},
	{"ta", "tamil"}, {"no", "norwegian"}, {"th", "thai"}, {"ur", "urdu"},
	{"hr", "croatian"}, {"bg", "bulgarian"}, {"lt", "lithuanian"}, {"la", "latin"},
	{"mi", "maori"}, {"ml", "malayalam"}, {"cy", "welsh"}, {"sk", "slovak"},
	{"te", "telugu"}, {"fa", "persian"}, {"lv", "latvian"}, {"bn", "bengali"},
	{"sr", "serbian"}, {"az", "azerbaijani"}, {"sl", "slovenian"}, {"kn", "kannada"},
	{"et", "estonian"}, {"mk", "macedonian"}, {"br", "breton"}, {"eu", "basque"},
	{"is", "icelandic"}, {"hy", "armenian"}, {"ne", "nepali"}, {"mn", "mongolian"},
	{"bs", "bosnian"}, {"kk", "kazakh"}, {"sq", "albanian"}, {"sw", "swahili"},
	{"gl", "galician"}, {"mr", "marathi"}, {"pa", "punjabi"}, {"si", "sinhala"},
	{"km", "khmer"}, {"sn", "shona"}, {"yo", "yoruba"}, {"so", "somali"},
	{"af", "afrikaans"}, {"oc", "occitan"}, {"ka", "georgian"}, {"be", "belarusian"},
	{"tg", "tajik"}, {"sd", "sindhi"}, {"gu", "gujarati"}, {"am", "amharic"},
	{"yi", "yiddish"}, {"lo", "lao"}, {"uz", "uzbek"}, {"fo", "faroese"},
	{"ht", "haitian creole"}, {"ps", "pashto"}, {"tk", "turkmen"}, {"nn", "nynorsk"},
	{"mt", "maltese"}, {"sa", "sanskrit"}, {"lb", "luxembourgish"}, {"my", "myanmar"},
	{"bo", "tibetan"}, {"tl", "tagalog"}, {"mg", "malagasy"}, {"as", "assamese"},
	{"tt", "tatar"}, {"haw", "hawaiian"}, {"ln", "lingala"}, {"ha", "hausa"},
	{"ba", "bashkir"}, {"jv", "javanese"}, {"su", "sundanese"}, {"yue", "cantonese"},
}

// languageNameAliases are other names Whisper accepts for a language.
var languageNameAliases = map[string]string{
	"burmese": "my", "valencian": "ca", "flemish": "nl", "haitian": "ht",
	"letzeburgesch": "lb", "pushto": "ps", "panjabi": "pa", "moldavian": "ro",
	"moldovan": "ro", "sinhalese": "si", "castilian": "es", "mandarin": "zh",
}

// languageCodeAliases are codes vendors send that are not the code
// Transcript.Language uses.
var languageCodeAliases = map[string]string{
	"jw": "jv", // Whisper's code for Javanese
	"iw": "he", // withdrawn ISO 639-1 codes still in use
	"in": "id",
	"ji": "yi",
}

var (
	codeByName = func() map[string]string {
		m := make(map[string]string, len(whisperLanguages)+len(languageNameAliases))
		for _, l := range whisperLanguages {
			m[l.name] = l.code
		}
		for name, code := range languageNameAliases {
			m[name] = code
		}
		return m
	}()
	nameByCode = func() map[string]string {
		m := make(map[string]string, len(whisperLanguages))
		for _, l := range whisperLanguages {
			m[l.code] = l.name
		}
		return m
	}()
)

// languageCode returns the code of a language name as Whisper spells it,
// in any case and with surrounding spaces ("English" → "en"), or "".
func languageCode(name string) string {
	return codeByName[strings.ToLower(strings.TrimSpace(name))]
}

// languageName returns Whisper's name for a code from languageCode, or "".
func languageName(code string) string {
	return nameByCode[code]
}

// normalizeLanguage turns what a vendor or a caller says about the language
// into Transcript.Language: a Whisper language name ("english"), a code
// ("en", "EN"), or a tag with a region ("en-US", "en_us", "de-CH") become
// the lower-case ISO 639-1 code ("en"); anything else becomes "".
func normalizeLanguage(s string) string {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return ""
	}
	if code, ok := codeByName[t]; ok {
		return code
	}
	base, _, _ := strings.Cut(strings.ReplaceAll(t, "_", "-"), "-")
	if code, ok := languageCodeAliases[base]; ok {
		return code
	}
	if _, ok := nameByCode[base]; ok {
		return base
	}
	if len(base) == 2 && isASCIILetter(base[0]) && isASCIILetter(base[1]) {
		return base
	}
	return ""
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' }
