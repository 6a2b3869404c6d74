package audio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"runtime/metrics"
	"testing"
)

// heapAllocs returns the bytes allocated on the heap so far. A large
// allocation is counted when it is made.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// maxParseAlloc bounds what parsing any input may allocate: a few small
// values and the pooled buffer io.Discard reads through, nothing sized by the
// input's declared chunk sizes.
const maxParseAlloc = 256 << 10

// FuzzParseWAV checks that ParseWAV never panics, never allocates from a
// declared size, returns a WAVError for every bad input (the reader never
// fails here), reports a duration only within what the input holds, and that
// Store.Inspect's one-pass reading agrees with it.
func FuzzParseWAV(f *testing.F) {
	mono := pcm(16000, 1, 16)
	for _, seed := range [][]byte{
		nil,
		[]byte("RIFF"),
		[]byte("RIFF\x00\x00\x00\x00WAVE"),
		wav(mono.chunk(), data(320)),
		wav(list(), mono.chunk(), raw("fact", []byte{1, 2, 3}), data(33)),
		wav(spec(tagFloat, 48000, 2, 32).chunk(), data(64)),
		wav(spec(tagMuLaw, 8000, 1, 8).chunk(), data(80)),
		unsetRIFF(wav(mono.chunk(), streamed(100, streamedSize)), streamedSize),
		unsetRIFF(wav(mono.chunk(), streamed(100, 0)), 0),
		wav(mono.chunk(), chunk{id: "LIST", size: 0xFFFFFFF0, body: []byte("INFO")}),
		wav(chunk{id: "fmt ", size: 0xFFFFFFFF, body: mono.chunk().body}),
		riff("RF64", "WAVE", ds64(0, 1<<62), mono.chunk(), streamed(10, streamedSize)),
		riff("RF64", "WAVE", ds64(0, 64), mono.chunk(), streamed(64, streamedSize)),
		func() []byte { e := pcm(48000, 2, 24); e.extensible = true; return wav(e.chunk(), data(60)) }(),
		[]byte("ID3\x04\x00\x00\x00\x00\x00\x00\xff\xfb"),
	} {
		f.Add(seed)
	}
	s := &Store{root: "mem://fuzz", maxBytes: MaxBytesDefault}
	f.Fuzz(func(t *testing.T, in []byte) {
		// The heap counter is process-wide: other goroutines (parallel
		// tests) add to it. The least of three runs is ParseWAV's own.
		var info WAVInfo
		var err error
		grew := ^uint64(0)
		for range 3 {
			before := heapAllocs()
			info, err = ParseWAV(bytes.NewReader(in))
			grew = min(grew, heapAllocs()-before)
		}
		if grew > maxParseAlloc+uint64(len(in)) {
			t.Fatalf("ParseWAV allocated %d bytes for a %d-byte input", grew, len(in))
		}

		if err != nil {
			var we *WAVError
			if !errors.As(err, &we) {
				t.Fatalf("ParseWAV(bytes.Reader) error %v is not a WAVError", err)
			}
			if we.Offset < 0 || we.Offset > int64(len(in)) {
				t.Fatalf("error offset %d outside a %d-byte input", we.Offset, len(in))
			}
			if we.Reason == WAVUnknownLength {
				t.Fatalf("length unknown for a bytes.Reader: %v", err)
			}
		} else {
			if info.SampleRate <= 0 || info.Channels <= 0 || info.BitsPerSample <= 0 || info.Encoding == "" {
				t.Fatalf("ParseWAV() = %+v: format fields must be set", info)
			}
			if info.DataBytes < 0 || info.DataBytes > int64(len(in)) || info.Duration < 0 {
				t.Fatalf("ParseWAV() = %+v for a %d-byte input", info, len(in))
			}
		}

		// Without the length, the format agrees; only the data length may
		// differ (declared rather than present, so possibly too long for a
		// Duration, or unknown).
		pinfo, perr := ParseWAV(plain{bytes.NewReader(in)})
		if (err == nil) != (perr == nil) {
			var we *WAVError
			if !errors.As(perr, &we) || (we.Reason != WAVUnknownLength && we.Reason != WAVInvalidSize) {
				t.Fatalf("with length: %v; without: %v", err, perr)
			}
		}
		if err == nil && perr == nil && (pinfo.SampleRate != info.SampleRate || pinfo.Channels != info.Channels || pinfo.Encoding != info.Encoding) {
			t.Fatalf("with length: %+v; without: %+v", info, pinfo)
		}

		// Inspect's single pass computes the same as ParseWAV and sha256.
		got, derr := s.digest(context.Background(), "k", bytes.NewReader(in))
		if derr != nil {
			t.Fatalf("digest() error = %v", derr)
		}
		sum := sha256.Sum256(in)
		want := Info{Key: "k", SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(in))}
		if err == nil {
			want.Format, want.Duration = "wav", info.Duration
		}
		if got != want {
			t.Fatalf("digest() = %+v, want %+v", got, want)
		}
	})
}
