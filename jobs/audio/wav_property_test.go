package audio

import (
	"bytes"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// extraChunk draws a chunk the parser must skip, of any size, odd included.
func extraChunk() *rapid.Generator[chunk] {
	return rapid.Custom(func(t *rapid.T) chunk {
		id := rapid.SampledFrom([]string{"LIST", "fact", "junk", "JUNK", "bext", "cue ", "PEAK", "ds64"}).Draw(t, "id")
		body := rapid.SliceOfN(rapid.Byte(), 0, 301).Draw(t, "body")
		return raw(id, body)
	})
}

// For any consistent format and any whole number of frames, with any chunks
// to skip around fmt and after data, in any of the ways a writer can state
// the data size, the parsed duration is frames/rate, rounded down to the
// nanosecond, and the format is what was written.
func TestParseWAVProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		enc := rapid.SampledFrom([]Encoding{EncodingPCM, EncodingFloat, EncodingALaw, EncodingMuLaw}).Draw(t, "encoding")
		var tag uint16
		var bits int
		switch enc {
		case EncodingPCM:
			tag, bits = tagPCM, rapid.SampledFrom([]int{8, 16, 24, 32}).Draw(t, "bits")
		case EncodingFloat:
			tag, bits = tagFloat, rapid.SampledFrom([]int{32, 64}).Draw(t, "bits")
		case EncodingALaw:
			tag, bits = tagALaw, 8
		case EncodingMuLaw:
			tag, bits = tagMuLaw, 8
		}
		rate := rapid.OneOf(
			rapid.SampledFrom([]int{8000, 11025, 16000, 22050, 32000, 44100, 48000, 96000}),
			rapid.IntRange(1, 384000),
		).Draw(t, "rate")
		channels := rapid.IntRange(1, 8).Draw(t, "channels")
		frames := rapid.IntRange(0, 20000).Draw(t, "frames")

		f := spec(tag, rate, channels, bits)
		f.extensible = rapid.Bool().Draw(t, "extensible")
		f.cbSize = !f.extensible && rapid.Bool().Draw(t, "cbSize")
		dataLen := frames * channels * bits / 8
		d := data(dataLen)
		// A streamed WAV leaves the data size (and the RIFF size) unset.
		sizeForm := rapid.SampledFrom([]string{"declared", "0xFFFFFFFF", "0"}).Draw(t, "size form")
		switch sizeForm {
		case "0xFFFFFFFF":
			d.size, d.noPad = streamedSize, true
		case "0":
			d.size, d.noPad = 0, true
		}

		var chunks []chunk
		chunks = append(chunks, rapid.SliceOfN(extraChunk(), 0, 3).Draw(t, "before fmt")...)
		chunks = append(chunks, f.chunk())
		chunks = append(chunks, rapid.SliceOfN(extraChunk(), 0, 3).Draw(t, "before data")...)
		chunks = append(chunks, d)
		trailing := rapid.SliceOfN(extraChunk(), 0, 2).Draw(t, "after data")
		if sizeForm == "declared" { // a streamed WAV's data runs to the end
			chunks = append(chunks, trailing...)
		}

		file := wav(chunks...)
		if sizeForm != "declared" {
			file = unsetRIFF(file, rapid.SampledFrom([]uint32{0, streamedSize}).Draw(t, "RIFF size"))
		}
		got, err := ParseWAV(bytes.NewReader(file))
		if err != nil {
			t.Fatalf("ParseWAV() error = %v", err)
		}
		want := WAVInfo{
			SampleRate: rate, Channels: channels, BitsPerSample: bits, Encoding: enc,
			DataBytes: int64(dataLen),
			Duration:  time.Duration(int64(frames) * int64(time.Second) / int64(rate)),
		}
		if got != want {
			t.Fatalf("ParseWAV() = %+v, want %+v", got, want)
		}
	})
}
