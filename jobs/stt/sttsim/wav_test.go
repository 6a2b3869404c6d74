package sttsim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

func TestParseWAV(t *testing.T) {
	t.Parallel()
	junk := chunk{"JUNK", make([]byte, 27)} // odd: padded
	cases := []struct {
		name     string
		file     []byte
		want     time.Duration
		wantData int64
	}{
		{"8 kHz mono 16-bit", wavFile(wavSpec{rate: 8000, channels: 1, bits: 16, dataBytes: 48000}), 3 * time.Second, 48000},
		{"44.1 kHz stereo 16-bit", wavFile(wavSpec{rate: 44100, channels: 2, bits: 16, dataBytes: 44100 * 4 / 2}), 500 * time.Millisecond, 88200},
		{"LIST before data", wavFile(wavSpec{rate: 16000, channels: 1, bits: 16, dataBytes: 32000 * 41 / 10, between: []chunk{listChunk()}}), 4100 * time.Millisecond, 131200},
		{"LIST and JUNK before fmt", wavFile(wavSpec{rate: 8000, channels: 1, bits: 8, dataBytes: 12000, before: []chunk{junk, listChunk()}}), 1500 * time.Millisecond, 12000},
		{"LIST after data", wavFile(wavSpec{rate: 8000, channels: 1, bits: 16, dataBytes: 16000, after: []chunk{listChunk()}}), time.Second, 16000},
		{"extensible fmt of 40 bytes", wavFile(wavSpec{rate: 8000, channels: 1, bits: 16, dataBytes: 16000, fmtExtra: make([]byte, 24)}), time.Second, 16000},
		{"odd data size", wavFile(wavSpec{rate: 8000, channels: 1, bits: 8, dataBytes: 8001}), time.Second + 125*time.Microsecond, 8001},
		{"no samples", wavFile(wavSpec{rate: 8000, channels: 1, bits: 16}), 0, 0},
		{"data cut short", wavFile(wavSpec{rate: 8000, channels: 1, bits: 16, dataBytes: 8000, declaredData: 16000}), 500 * time.Millisecond, 8000},
		{"streaming size", wavFile(wavSpec{rate: 8000, channels: 1, bits: 16, dataBytes: 4000, declaredData: -1}), 250 * time.Millisecond, 4000},
	}
	for _, c := range cases {
		info, err := parseWAV(bytes.NewReader(c.file), int64(len(c.file)))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if info.Duration != c.want || info.DataBytes != c.wantData {
			t.Errorf("%s: duration %v, data %d; want %v, %d", c.name, info.Duration, info.DataBytes, c.want, c.wantData)
		}
	}

	info, _ := parseWAV(bytes.NewReader(wavFile(wavSpec{rate: 22050, channels: 2, bits: 24, dataBytes: 6})), 100)
	if info.AudioFormat != 1 || info.Channels != 2 || info.SampleRate != 22050 || info.BitsPerSample != 24 || info.ByteRate != 22050*6 {
		t.Errorf("fmt fields %+v", info)
	}
}

func TestParseWAVRefuses(t *testing.T) {
	t.Parallel()
	good := wavFile(wavSpec{rate: 8000, channels: 1, bits: 16, dataBytes: 1600})
	zeroRate := bytes.Clone(good)
	binary.LittleEndian.PutUint32(zeroRate[12+8+8:], 0) // fmt's byte rate
	shortFmt := append([]byte("RIFF\x00\x00\x00\x00WAVEfmt \x08\x00\x00\x00"), make([]byte, 8)...)
	dataFirst := append([]byte("RIFF\x00\x00\x00\x00WAVE"), chunk{"data", make([]byte, 4)}.bytes()...)
	hugeChunk := append([]byte("RIFF\x00\x00\x00\x00WAVELIST\xff\xff\xff\x7f"), make([]byte, 64)...)
	cases := map[string][]byte{
		"empty":              nil,
		"text":               []byte("hello, this is not audio at all"),
		"RIFF but AVI":       append([]byte("RIFF\x00\x00\x00\x00AVI "), good[12:]...),
		"RIFX (big-endian)":  append([]byte("RIFX"), good[4:]...),
		"header only":        good[:12],
		"cut inside fmt":     good[:30],
		"cut before data":    good[:36],
		"no fmt":             append([]byte("RIFF\x00\x00\x00\x00WAVE"), listChunk().bytes()...),
		"byte rate 0":        zeroRate,
		"fmt under 16 bytes": shortFmt,
		"data before fmt":    dataFirst,
		"chunk past the end": hugeChunk,
	}
	for name, file := range cases {
		if info, err := parseWAV(bytes.NewReader(file), int64(len(file))); !errors.Is(err, errNotWAV) {
			t.Errorf("%s: got %+v, %v; want errNotWAV", name, info, err)
		}
	}
}

func TestSubmitMeasuresWAVWithList(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	body := b.file("list.wav", wavFile(wavSpec{rate: 16000, channels: 1, bits: 16, dataBytes: 32000 * 7, between: []chunk{listChunk()}}))
	resp, data := b.submit("k", body)
	wantStatus(t, resp, data, 200)
	if tr := decode[wireTranscription](t, data); *tr.DurationSeconds != 7 {
		t.Errorf("duration_seconds %v, want 7", *tr.DurationSeconds)
	}
}

// FuzzParseWAV checks that no input makes parseWAV panic, and that what it
// accepts is consistent.
func FuzzParseWAV(f *testing.F) {
	f.Add(wavFile(wavSpec{rate: 8000, channels: 1, bits: 16, dataBytes: 160}))
	f.Add(wavFile(wavSpec{rate: 8000, channels: 1, bits: 16, dataBytes: 16, between: []chunk{listChunk()}, declaredData: -1}))
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVE"))
	f.Fuzz(func(t *testing.T, file []byte) {
		info, err := parseWAV(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			if !errors.Is(err, errNotWAV) {
				t.Fatalf("error %v does not wrap errNotWAV", err)
			}
			return
		}
		if info.ByteRate <= 0 || info.DataBytes < 0 || info.DataBytes > int64(len(file)) || info.Duration < 0 {
			t.Fatalf("inconsistent %+v for %d bytes", info, len(file))
		}
	})
}
