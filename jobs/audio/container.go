package audio

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrFormat matches every *FormatError with errors.Is.
var ErrFormat = errors.New("recording is not in the format its name says")

// FormatError is returned by Store.Inspect for a recording whose file
// extension names an audio container that its first bytes do not match:
// a text file named ".wav", say.
type FormatError struct {
	// Key is the recording's bucket key.
	Key string
	// Extension is the key's extension, lower case, with its dot (".wav").
	Extension string
	// Want describes the signature the extension calls for, for people.
	Want string
}

// Error names the key, the extension and the signature looked for.
func (e *FormatError) Error() string {
	return fmt.Sprintf("recording %q is named %s but does not start like one (%s)", e.Key, e.Extension, e.Want)
}

// Is reports whether target is ErrFormat.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

// container is an audio container's signature.
type container struct {
	want  string            // for people
	match func([]byte) bool // on the first sniffLen bytes (fewer for a short file)
}

// sniffLen is how many leading bytes are kept to check the container.
const sniffLen = 64

// Containers lists the file extensions whose recordings Inspect checks, each
// with the signature it looks for. They are the containers the speech
// adapters send (jobs/stt). Other extensions are read as they are.
func Containers() map[string]string {
	out := make(map[string]string, len(containers))
	for ext, c := range containers {
		out[ext] = c.want
	}
	return out
}

var (
	riffWAVE = container{`"RIFF" or "RF64" then "WAVE"`, func(b []byte) bool {
		return len(b) >= 12 && (bytes.HasPrefix(b, []byte("RIFF")) || bytes.HasPrefix(b, []byte("RF64"))) && string(b[8:12]) == "WAVE"
	}}
	mpeg = container{`an ID3 tag or an MPEG audio frame`, func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("ID3")) || len(b) >= 2 && b[0] == 0xFF && b[1]&0xE0 == 0xE0
	}}
	aac = container{`an ID3 tag, "ADIF" or an ADTS frame`, func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("ID3")) || bytes.HasPrefix(b, []byte("ADIF")) || len(b) >= 2 && b[0] == 0xFF && b[1]&0xF6 == 0xF0
	}}
	flac = container{`"fLaC" (or an ID3 tag)`, func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("fLaC")) || bytes.HasPrefix(b, []byte("ID3"))
	}}
	ogg  = container{`"OggS"`, func(b []byte) bool { return bytes.HasPrefix(b, []byte("OggS")) }}
	mp4  = container{`an ISO BMFF "ftyp" box`, func(b []byte) bool { return len(b) >= 8 && string(b[4:8]) == "ftyp" }}
	webm = container{`an EBML header`, func(b []byte) bool { return bytes.HasPrefix(b, []byte{0x1A, 0x45, 0xDF, 0xA3}) }}
	amr  = container{`"#!AMR"`, func(b []byte) bool { return bytes.HasPrefix(b, []byte("#!AMR")) }}
)

// containers maps the extensions jobs/stt sends to their signatures.
var containers = map[string]container{
	".wav":  riffWAVE,
	".mp3":  mpeg,
	".mpeg": mpeg,
	".mpga": mpeg,
	".aac":  aac,
	".flac": flac,
	".ogg":  ogg,
	".oga":  ogg,
	".opus": ogg,
	".m4a":  mp4,
	".mp4":  mp4,
	".webm": webm,
	".amr":  amr,
}

// checkContainer refuses head, the first bytes of the recording at key,
// when key's extension is in containers and head does not match it.
func checkContainer(key string, head []byte) error {
	ext := strings.ToLower(path.Ext(key))
	c, ok := containers[ext]
	if !ok || c.match(head) {
		return nil
	}
	return &FormatError{Key: key, Extension: ext, Want: c.want}
}

// headWriter keeps the first sniffLen bytes written to it.
type headWriter struct{ b []byte }

func (h *headWriter) Write(p []byte) (int, error) {
	if room := sniffLen - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
