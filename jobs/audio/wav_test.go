package audio

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// plain hides everything but Read, so the parser cannot know the length.
type plain struct{ r io.Reader }

func (p plain) Read(b []byte) (int, error) { return p.r.Read(b) }

// failing fails every read with err.
type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

func TestParseWAV(t *testing.T) {
	t.Parallel()

	mono16k := pcm(16000, 1, 16)
	withCB := mono16k
	withCB.cbSize = true
	zeroRate := mono16k
	zeroRate.byteRate = 0
	zeroChannels := mono16k
	zeroChannels.channels = 0
	zeroSampleRate := mono16k
	zeroSampleRate.rate = 0
	zeroBits := mono16k
	zeroBits.bits = 0
	ext24 := pcm(48000, 2, 24)
	ext24.extensible = true
	extFloat := spec(tagFloat, 16000, 1, 32)
	extFloat.extensible = true
	mp3 := spec(0x0055, 16000, 1, 16)
	extMP3 := mp3
	extMP3.extensible = true
	shortFmt := raw("fmt ", mono16k.chunk().body[:14])
	shortExt := raw("fmt ", ext24.chunk().body[:18])

	full := wav(mono16k.chunk(), data(32000))

	type want struct {
		info   WAVInfo
		reason WAVReason // "" when no WAVError is expected
	}
	ok := func(rate, channels, bits int, enc Encoding, dataBytes int64, d time.Duration) want {
		return want{info: WAVInfo{SampleRate: rate, Channels: channels, BitsPerSample: bits, Encoding: enc, DataBytes: dataBytes, Duration: d}}
	}
	fail := func(r WAVReason) want { return want{reason: r} }

	tests := []struct {
		name  string
		input []byte
		plain bool // read through plain, so the length is unknown
		want  want
	}{
		{"mono 16-bit 16 kHz", full, false, ok(16000, 1, 16, EncodingPCM, 32000, time.Second)},
		{"mono 16-bit 16 kHz, length unknown", full, true, ok(16000, 1, 16, EncodingPCM, 32000, time.Second)},
		{"stereo 16-bit 44.1 kHz", wav(pcm(44100, 2, 16).chunk(), data(88200)), false, ok(44100, 2, 16, EncodingPCM, 88200, 500*time.Millisecond)},
		{"mono 8-bit 8 kHz", wav(pcm(8000, 1, 8).chunk(), data(8000)), false, ok(8000, 1, 8, EncodingPCM, 8000, time.Second)},
		{"stereo 8-bit 8 kHz, part of a second", wav(pcm(8000, 2, 8).chunk(), data(2*1234)), false, ok(8000, 2, 8, EncodingPCM, 2468, 154250*time.Microsecond)},
		{"stereo 16-bit 16 kHz", wav(pcm(16000, 2, 16).chunk(), data(64000*3)), false, ok(16000, 2, 16, EncodingPCM, 192000, 3*time.Second)},
		{"mono 16-bit 22.05 kHz (espeak-ng)", wav(pcm(22050, 1, 16).chunk(), data(44100)), false, ok(22050, 1, 16, EncodingPCM, 44100, time.Second)},
		{"mono 8-bit 44.1 kHz, 1 frame", wav(pcm(44100, 1, 8).chunk(), data(1)), false, ok(44100, 1, 8, EncodingPCM, 1, 22675*time.Nanosecond)},
		{"empty data chunk, length known", wav(mono16k.chunk(), raw("data", nil)), false, ok(16000, 1, 16, EncodingPCM, 0, 0)},
		{"empty data chunk, length unknown", wav(mono16k.chunk(), raw("data", nil)), true, ok(16000, 1, 16, EncodingPCM, 0, 0)},
		{"18-byte fmt with cbSize", wav(withCB.chunk(), data(16000)), false, ok(16000, 1, 16, EncodingPCM, 16000, 500*time.Millisecond)},
		{"LIST chunk before data", wav(mono16k.chunk(), list(), data(32000)), false, ok(16000, 1, 16, EncodingPCM, 32000, time.Second)},
		{"LIST chunk before fmt", wav(list(), mono16k.chunk(), data(32000)), false, ok(16000, 1, 16, EncodingPCM, 32000, time.Second)},
		{"odd-sized chunks padded", wav(raw("junk", []byte("abc")), mono16k.chunk(), raw("fact", []byte{1, 2, 3, 4, 5}), list(), data(16000)), true, ok(16000, 1, 16, EncodingPCM, 16000, 500*time.Millisecond)},
		{"odd-sized data chunk", wav(pcm(8000, 1, 8).chunk(), data(4001), list()), false, ok(8000, 1, 8, EncodingPCM, 4001, 500125*time.Microsecond)},
		{"second fmt chunk ignored", wav(mono16k.chunk(), pcm(8000, 1, 8).chunk(), data(32000)), false, ok(16000, 1, 16, EncodingPCM, 32000, time.Second)},
		{"IEEE float 32-bit stereo 48 kHz", wav(spec(tagFloat, 48000, 2, 32).chunk(), raw("fact", []byte{0, 0x77, 1, 0}), data(8*48000/4)), false, ok(48000, 2, 32, EncodingFloat, 96000, 250*time.Millisecond)},
		{"µ-law 8 kHz", wav(spec(tagMuLaw, 8000, 1, 8).chunk(), data(16000)), false, ok(8000, 1, 8, EncodingMuLaw, 16000, 2*time.Second)},
		{"A-law 8 kHz", wav(spec(tagALaw, 8000, 1, 8).chunk(), data(4000)), false, ok(8000, 1, 8, EncodingALaw, 4000, 500*time.Millisecond)},
		{"extensible PCM 24-bit stereo 48 kHz", wav(ext24.chunk(), data(6*48000)), false, ok(48000, 2, 24, EncodingPCM, 288000, time.Second)},
		{"extensible float", wav(extFloat.chunk(), data(64000)), false, ok(16000, 1, 32, EncodingFloat, 64000, time.Second)},
		{"streamed 0xFFFFFFFF, length known", wav(mono16k.chunk(), streamed(48000, streamedSize)), false, ok(16000, 1, 16, EncodingPCM, 48000, 1500*time.Millisecond)},
		{"streamed 0, length known", unsetRIFF(wav(mono16k.chunk(), list(), streamed(16000, 0)), 0), false, ok(16000, 1, 16, EncodingPCM, 16000, 500*time.Millisecond)},
		{"streamed 0 and RIFF 0xFFFFFFFF, length known", unsetRIFF(wav(mono16k.chunk(), streamed(8000, 0)), streamedSize), false, ok(16000, 1, 16, EncodingPCM, 8000, 250*time.Millisecond)},
		{"data size 0 with the RIFF size set is empty", wav(mono16k.chunk(), raw("data", nil), list()), true, ok(16000, 1, 16, EncodingPCM, 0, 0)},
		{"streamed 0xFFFFFFFF, length unknown", wav(mono16k.chunk(), streamed(48000, streamedSize)), true, fail(WAVUnknownLength)},
		{"streamed 0, length unknown", unsetRIFF(wav(mono16k.chunk(), streamed(48000, 0)), 0), true, fail(WAVUnknownLength)},
		{"data cut short, length known", wav(mono16k.chunk(), streamed(16000, 32000)), false, ok(16000, 1, 16, EncodingPCM, 16000, 500*time.Millisecond)},
		{"data cut short, length unknown", wav(mono16k.chunk(), streamed(16000, 32000)), true, ok(16000, 1, 16, EncodingPCM, 32000, time.Second)},
		{"RF64 with ds64", riff("RF64", "WAVE", ds64(0, 64000), mono16k.chunk(), streamed(64000, streamedSize)), true, ok(16000, 1, 16, EncodingPCM, 64000, 2*time.Second)},
		{"RF64 without ds64", riff("RF64", "WAVE", mono16k.chunk(), data(10)), false, fail(WAVInvalidSize)},
		{"RF64 ds64 too short", riff("RF64", "WAVE", raw("ds64", make([]byte, 8)), mono16k.chunk(), data(10)), false, fail(WAVInvalidSize)},
		{"ds64 outside RF64 is skipped", wav(ds64(0, 999), mono16k.chunk(), data(16000)), false, ok(16000, 1, 16, EncodingPCM, 16000, 500*time.Millisecond)},

		{"empty", nil, false, fail(WAVTruncated)},
		{"truncated RIFF header", full[:6], false, fail(WAVTruncated)},
		{"truncated RIFF header, 11 bytes", full[:11], false, fail(WAVTruncated)},
		{"truncated chunk header", full[:16], false, fail(WAVTruncated)},
		{"truncated fmt chunk", full[:30], false, fail(WAVTruncated)},
		{"truncated data chunk header", full[:40], false, fail(WAVTruncated)},
		{"truncated inside a skipped chunk", wav(mono16k.chunk(), list())[:50], false, fail(WAVTruncated)},
		{"skipped chunk longer than the file", wav(mono16k.chunk(), chunk{id: "LIST", size: 0xFFFFFFF0, body: []byte("INFO")}), false, fail(WAVTruncated)},
		{"MP3", []byte("ID3\x04\x00\x00\x00\x00\x00\x00\xff\xfb"), false, fail(WAVNotRIFF)},
		{"Ogg", []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00"), false, fail(WAVNotRIFF)},
		{"text", []byte("rate sheet for Chicago to Dallas"), false, fail(WAVNotRIFF)},
		{"three bytes", []byte("RIF"), false, fail(WAVTruncated)},
		{"RIFF but AVI", riff("RIFF", "AVI ", raw("avih", make([]byte, 56))), false, fail(WAVNotRIFF)},
		{"zero byte rate", wav(zeroRate.chunk(), data(100)), false, fail(WAVZeroByteRate)},
		{"zero channels", wav(zeroChannels.chunk(), data(100)), false, fail(WAVInvalidFmt)},
		{"zero sample rate", wav(zeroSampleRate.chunk(), data(100)), false, fail(WAVInvalidFmt)},
		{"zero bits per sample", wav(zeroBits.chunk(), data(100)), false, fail(WAVInvalidFmt)},
		{"fmt chunk too short", wav(shortFmt, data(100)), false, fail(WAVInvalidFmt)},
		{"extensible fmt too short", wav(shortExt, data(100)), false, fail(WAVInvalidFmt)},
		{"unsupported tag (MP3 in WAV)", wav(mp3.chunk(), data(100)), false, fail(WAVUnsupportedEncoding)},
		{"extensible with unsupported sub-format", wav(extMP3.chunk(), data(100)), false, fail(WAVUnsupportedEncoding)},
		{"data before fmt", wav(data(100), mono16k.chunk()), false, fail(WAVMissingFmt)},
		{"no fmt, no data", wav(list()), false, fail(WAVMissingFmt)},
		{"fmt but no data", wav(mono16k.chunk(), list()), false, fail(WAVMissingData)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var r io.Reader = bytes.NewReader(tt.input)
			if tt.plain {
				r = plain{r}
			}
			got, err := ParseWAV(r)
			if tt.want.reason != "" {
				var we *WAVError
				if !errors.As(err, &we) || we.Reason != tt.want.reason {
					t.Fatalf("ParseWAV() error = %v, want a WAVError with reason %s", err, tt.want.reason)
				}
				if !strings.HasPrefix(err.Error(), "wav: "+string(tt.want.reason)+" at byte ") {
					t.Errorf("error message %q does not start with the reason and offset", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseWAV() error = %v", err)
			}
			if got != tt.want.info {
				t.Errorf("ParseWAV() = %+v, want %+v", got, tt.want.info)
			}
		})
	}
}

// An unknown-length streamed WAV still reports its format.
func TestParseWAVUnknownLengthKeepsFormat(t *testing.T) {
	t.Parallel()
	got, err := ParseWAV(plain{bytes.NewReader(wav(pcm(8000, 2, 16).chunk(), streamed(100, streamedSize)))})
	var we *WAVError
	if !errors.As(err, &we) || we.Reason != WAVUnknownLength {
		t.Fatalf("error = %v, want WAVUnknownLength", err)
	}
	want := WAVInfo{SampleRate: 8000, Channels: 2, BitsPerSample: 16, Encoding: EncodingPCM, DataBytes: -1}
	if got != want {
		t.Errorf("info = %+v, want %+v", got, want)
	}
}

// ParseWAV stops at the data chunk's header: it never reads the audio.
func TestParseWAVDoesNotReadData(t *testing.T) {
	t.Parallel()
	header := wav(pcm(16000, 1, 16).chunk(), raw("data", nil))
	header = header[:len(header)-4]
	header = append(header, 0x00, 0x7d, 0x00, 0x00) // data size 32000
	r := io.MultiReader(bytes.NewReader(header), failing{errors.New("the audio must not be read")})
	got, err := ParseWAV(r)
	if err != nil {
		t.Fatalf("ParseWAV() error = %v", err)
	}
	if got.Duration != time.Second {
		t.Errorf("Duration = %v, want 1s", got.Duration)
	}
}

// A failing reader is reported as a read error, not as a bad file.
func TestParseWAVReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	full := wav(pcm(16000, 1, 16).chunk(), list(), data(100))
	for _, cut := range []int{0, 4, 12, 20, 40, 50} {
		r := io.MultiReader(bytes.NewReader(full[:cut]), failing{boom})
		_, err := ParseWAV(r)
		var we *WAVError
		if !errors.Is(err, boom) || errors.As(err, &we) {
			t.Errorf("cut at %d: error = %v, want the reader's error and no WAVError", cut, err)
		}
	}
}

// The length of an *os.File is known through Stat and Seek, from where the
// file is positioned.
func TestParseWAVFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "streamed.wav")
	prefix := []byte("xxxx")
	if err := os.WriteFile(p, append(prefix, wav(pcm(8000, 1, 8).chunk(), streamed(8000, streamedSize))...), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(int64(len(prefix)), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	got, err := ParseWAV(f)
	if err != nil {
		t.Fatalf("ParseWAV() error = %v", err)
	}
	if got.DataBytes != 8000 || got.Duration != time.Second {
		t.Errorf("ParseWAV() = %+v, want 8000 data bytes, 1s", got)
	}
}

func TestDurationOfOverflow(t *testing.T) {
	t.Parallel()
	if _, ok := durationOf(1<<62, 1); ok {
		t.Error("durationOf(2^62, 1) fits a Duration?")
	}
	if d, ok := durationOf(1<<62, 1<<32-1); !ok || d <= 0 {
		t.Errorf("durationOf(2^62, 2^32-1) = %v, %v", d, ok)
	}
	_, err := ParseWAV(plain{bytes.NewReader(riff("RF64", "WAVE", ds64(0, 1<<62), spec(tagPCM, 1, 1, 8).chunk(), streamed(0, streamedSize)))})
	var we *WAVError
	if !errors.As(err, &we) || we.Reason != WAVInvalidSize {
		t.Errorf("2^62 bytes at 1 B/s: error = %v, want WAVInvalidSize", err)
	}
}
