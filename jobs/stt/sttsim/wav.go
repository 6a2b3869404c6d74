package sttsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// WAVInfo is what the server reads from a RIFF/WAVE header.
type WAVInfo struct {
	AudioFormat   int   // 1 = PCM, 3 = IEEE float, 0xFFFE = extensible, ...
	Channels      int   // channels per frame
	SampleRate    int   // frames per second
	ByteRate      int   // bytes per second, as the fmt chunk states it
	BitsPerSample int   // bits per sample
	DataBytes     int64 // audio bytes present: the data chunk's size, or what the file holds when it is cut short
	Duration      time.Duration
}

// errNotWAV is wrapped by every parseWAV error: the file is not a WAVE file
// this server can measure.
var errNotWAV = errors.New("not a RIFF/WAVE file")

// parseWAV reads the header of a RIFF/WAVE file of size bytes: the RIFF
// header, then chunks in any order until both "fmt " and "data" are seen.
// Other chunks (LIST, fact, JUNK, ...) are skipped, with RIFF's pad byte
// after an odd-sized chunk. The duration is the data chunk's size divided
// by the byte rate. A data chunk that claims more bytes than the file holds
// (a recording cut short, or a streaming writer's 0xFFFFFFFF) is measured
// by what the file holds.
func parseWAV(r io.ReadSeeker, size int64) (WAVInfo, error) {
	var riff [12]byte
	if _, err := io.ReadFull(r, riff[:]); err != nil {
		return WAVInfo{}, fmt.Errorf("%w: reading the RIFF header: %w", errNotWAV, err)
	}
	if string(riff[0:4]) != "RIFF" || string(riff[8:12]) != "WAVE" {
		return WAVInfo{}, fmt.Errorf("%w: no RIFF....WAVE header", errNotWAV)
	}
	var (
		info   WAVInfo
		gotFmt bool
		off    = int64(len(riff))
	)
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if !gotFmt {
				return WAVInfo{}, fmt.Errorf("%w: no fmt chunk before the end of the file", errNotWAV)
			}
			return WAVInfo{}, fmt.Errorf("%w: no data chunk before the end of the file", errNotWAV)
		}
		off += int64(len(hdr))
		id, n := string(hdr[0:4]), int64(binary.LittleEndian.Uint32(hdr[4:8]))
		switch id {
		case "fmt ":
			if n < 16 {
				return WAVInfo{}, fmt.Errorf("%w: fmt chunk of %d bytes, want at least 16", errNotWAV, n)
			}
			var f [16]byte
			if _, err := io.ReadFull(r, f[:]); err != nil {
				return WAVInfo{}, fmt.Errorf("%w: fmt chunk cut short", errNotWAV)
			}
			info.AudioFormat = int(binary.LittleEndian.Uint16(f[0:2]))
			info.Channels = int(binary.LittleEndian.Uint16(f[2:4]))
			info.SampleRate = int(binary.LittleEndian.Uint32(f[4:8]))
			info.ByteRate = int(binary.LittleEndian.Uint32(f[8:12]))
			info.BitsPerSample = int(binary.LittleEndian.Uint16(f[14:16]))
			if info.ByteRate == 0 {
				return WAVInfo{}, fmt.Errorf("%w: byte rate 0", errNotWAV)
			}
			gotFmt = true
			if err := skip(r, n-16+n%2); err != nil {
				return WAVInfo{}, fmt.Errorf("%w: fmt chunk cut short", errNotWAV)
			}
		case "data":
			if !gotFmt {
				return WAVInfo{}, fmt.Errorf("%w: data chunk before the fmt chunk", errNotWAV)
			}
			info.DataBytes = min(n, max(size-off, 0))
			// At most 4 GiB of data times 1e9 fits an int64.
			info.Duration = time.Duration(info.DataBytes * int64(time.Second) / int64(info.ByteRate))
			return info, nil
		default:
			if err := skip(r, n+n%2); err != nil {
				return WAVInfo{}, fmt.Errorf("%w: %q chunk cut short", errNotWAV, id)
			}
		}
		off += n + n%2
		if off > size {
			return WAVInfo{}, fmt.Errorf("%w: %q chunk runs past the end of the file", errNotWAV, id)
		}
	}
}

// skip moves r n bytes forward.
func skip(r io.ReadSeeker, n int64) error {
	_, err := r.Seek(n, io.SeekCurrent)
	return err
}
