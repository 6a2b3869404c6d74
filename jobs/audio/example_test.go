package audio_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"

	"github.com/callscribe/callscribe/jobs/audio"
)

// Inspect one of the committed test recordings: the SHA-256 that the
// business key is built from, the size, and the duration from the WAV
// header, all from one read.
func ExampleStore_Inspect() {
	ctx := context.Background()
	store, err := audio.Open(ctx, audio.Config{URL: "../../testdata/recordings"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = store.Close() }()

	key, err := store.Key("northline/call-1001.wav")
	if err != nil {
		log.Fatal(err)
	}
	info, err := store.Inspect(ctx, key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Key, info.Format, info.Bytes, "bytes", info.Duration)
	fmt.Println(info.SHA256)
	// Output:
	// northline/call-1001.wav wav 211802 bytes 6.6174375s
	// c0dc2b9440df95d43b6de99a6eb8f988a9cd4f0f0f8d02776e0e0cfe81f95728
}

// Key refuses what leads outside the root, with a reason to branch on.
func ExampleStore_Key() {
	store, err := audio.Open(context.Background(), audio.Config{URL: "../../testdata/recordings"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = store.Close() }()

	for _, p := range []string{"./harbor/../harbor/call-2001.wav", "../../go.mod", "/etc/passwd"} {
		key, err := store.Key(p)
		var ke *audio.KeyError
		if errors.As(err, &ke) {
			fmt.Printf("%s: refused, %s\n", p, ke.Reason)
			continue
		}
		fmt.Printf("%s: key %s\n", p, key)
	}
	// Output:
	// ./harbor/../harbor/call-2001.wav: key harbor/call-2001.wav
	// ../../go.mod: refused, outside-root
	// /etc/passwd: refused, outside-root
}

// ParseWAV reads the header of a WAV file: here a 16 kHz mono 16-bit PCM
// header followed by half a second of silence.
func ExampleParseWAV() {
	const dataBytes = 16000
	header := struct {
		RIFF       [4]byte
		RIFFSize   uint32
		WAVE       [4]byte
		Fmt        [4]byte
		FmtSize    uint32
		Tag        uint16
		Channels   uint16
		SampleRate uint32
		ByteRate   uint32
		BlockAlign uint16
		Bits       uint16
		Data       [4]byte
		DataSize   uint32
	}{
		[4]byte{'R', 'I', 'F', 'F'}, 36 + dataBytes, [4]byte{'W', 'A', 'V', 'E'},
		[4]byte{'f', 'm', 't', ' '}, 16, 1, 1, 16000, 32000, 2, 16,
		[4]byte{'d', 'a', 't', 'a'}, dataBytes,
	}
	var file bytes.Buffer
	if err := binary.Write(&file, binary.LittleEndian, header); err != nil {
		log.Fatal(err)
	}
	file.Write(make([]byte, dataBytes))

	info, err := audio.ParseWAV(bytes.NewReader(file.Bytes()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d Hz, %d channel, %d-bit %s, %d data bytes: %v\n",
		info.SampleRate, info.Channels, info.BitsPerSample, info.Encoding, info.DataBytes, info.Duration)

	_, err = audio.ParseWAV(bytes.NewReader([]byte("ID3\x04 an MP3 file")))
	var we *audio.WAVError
	if errors.As(err, &we) {
		fmt.Println(we.Reason)
	}
	// Output:
	// 16000 Hz, 1 channel, 16-bit pcm, 16000 data bytes: 500ms
	// not-riff
}
