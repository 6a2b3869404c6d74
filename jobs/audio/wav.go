package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"time"
)

// Encoding is the sample encoding of a WAV file's data chunk.
type Encoding string

const (
	// EncodingPCM is integer linear PCM (WAVE format tag 1).
	EncodingPCM Encoding = "pcm"
	// EncodingFloat is IEEE floating point (format tag 3).
	EncodingFloat Encoding = "float"
	// EncodingALaw is G.711 A-law (format tag 6), common in telephony.
	EncodingALaw Encoding = "alaw"
	// EncodingMuLaw is G.711 µ-law (format tag 7), common in telephony.
	EncodingMuLaw Encoding = "mulaw"
)

// WAV format tags, as in the fmt chunk and in the first two bytes of a
// WAVE_FORMAT_EXTENSIBLE sub-format GUID.
const (
	tagPCM        = 0x0001
	tagFloat      = 0x0003
	tagALaw       = 0x0006
	tagMuLaw      = 0x0007
	tagExtensible = 0xFFFE
)

// ksDataFormatSuffix is the part of a KSDATAFORMAT_SUBTYPE_* GUID after its
// first two bytes (which hold the format tag).
var ksDataFormatSuffix = []byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71}

// streamedSize is the data (or RIFF) size a writer that could not seek back
// leaves in the header. Some such writers leave 0 instead: a data size of 0
// means the same when the RIFF size is unset too (0 or 0xFFFFFFFF), and an
// empty data chunk otherwise.
const streamedSize = 0xFFFFFFFF

// WAVInfo describes a WAV file, from its fmt and data chunk headers.
type WAVInfo struct {
	// SampleRate is in samples (frames) per second.
	SampleRate int
	// Channels is the number of interleaved channels.
	Channels int
	// BitsPerSample is the container size of one sample, in bits.
	BitsPerSample int
	// Encoding is the sample encoding (PCM, float, A-law, µ-law).
	Encoding Encoding
	// DataBytes is the length of the audio data: the data chunk's declared
	// size, or the bytes actually present after the data chunk header when
	// those are known and fewer (a truncated file) or the size was left
	// unset (a streamed WAV). It is -1 only alongside a WAVUnknownLength
	// error.
	DataBytes int64
	// Duration is DataBytes divided by the fmt chunk's byte rate, rounded
	// down to the nanosecond.
	Duration time.Duration
}

// WAVReason says why a stream is not a WAV file this package can measure.
// The values are stable strings, safe for a log attribute or a metric label.
type WAVReason string

const (
	// WAVNotRIFF: the stream does not start with "RIFF" (or "RF64") and
	// form type "WAVE".
	WAVNotRIFF WAVReason = "not-riff"
	// WAVTruncated: the stream ended inside the RIFF header, a chunk header,
	// the fmt chunk, or a chunk being skipped before the data chunk.
	WAVTruncated WAVReason = "truncated"
	// WAVMissingFmt: a data chunk came before any fmt chunk, or the stream
	// ended without one.
	WAVMissingFmt WAVReason = "missing-fmt"
	// WAVMissingData: the stream ended after the fmt chunk without a data
	// chunk.
	WAVMissingData WAVReason = "missing-data"
	// WAVInvalidFmt: the fmt chunk is too short or states zero channels, a
	// zero sample rate or zero bits per sample.
	WAVInvalidFmt WAVReason = "invalid-fmt"
	// WAVZeroByteRate: the fmt chunk's average byte rate is zero, so no
	// duration can be computed.
	WAVZeroByteRate WAVReason = "zero-byte-rate"
	// WAVUnsupportedEncoding: the format tag is not PCM, IEEE float, A-law
	// or µ-law (directly or through WAVE_FORMAT_EXTENSIBLE).
	WAVUnsupportedEncoding WAVReason = "unsupported-encoding"
	// WAVUnknownLength: the data chunk's size was left unset (a streamed
	// WAV: see ParseWAV) and the reader's length is not known.
	WAVUnknownLength WAVReason = "unknown-length"
	// WAVInvalidSize: an RF64 file lacks its ds64 chunk, or the data is too
	// long for its duration to fit in a time.Duration.
	WAVInvalidSize WAVReason = "invalid-size"
)

// WAVError is returned by ParseWAV for a stream that is not a WAV file it
// can measure. Errors from the reader itself are returned wrapped as they
// are, not as a WAVError, so that a caller can tell a bad file from a failed
// read.
type WAVError struct {
	// Reason classifies the problem.
	Reason WAVReason
	// Offset is the byte offset in the stream where the problem was found.
	Offset int64
	// Detail explains the problem for people; it is not for branching.
	Detail string
}

// Error reports the reason, the offset and the detail, e.g.
// wav: zero-byte-rate at byte 28: fmt chunk states a byte rate of 0.
func (e *WAVError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("wav: %s at byte %d", e.Reason, e.Offset)
	}
	return fmt.Sprintf("wav: %s at byte %d: %s", e.Reason, e.Offset, e.Detail)
}

// ParseWAV reads a RIFF/WAVE header from r and returns the format and the
// duration of the audio. It reads the RIFF header, then chunk after chunk
// until the data chunk's header, skipping chunks it does not need (LIST,
// fact, cue, ...) and their pad byte when their size is odd; it does not read
// the audio data. It supports PCM, IEEE float, A-law and µ-law, directly or
// through WAVE_FORMAT_EXTENSIBLE, and RF64 files with a ds64 chunk.
//
// The length of r is known when r has a Len method (bytes.Reader,
// strings.Reader, bytes.Buffer), or a Size or Stat method together with Seek
// (io.SectionReader, os.File, blob.Reader). When it is, a data chunk size
// left unset by a streaming writer (0xFFFFFFFF, or 0 in a file whose RIFF
// size is unset too) is replaced by the bytes actually present, and so is a
// declared size larger than what is present.
// When it is not, an unset size is a WAVUnknownLength error, returned with a
// WAVInfo whose format fields are filled and whose DataBytes is -1.
//
// Problems with the file are *WAVError values; errors from r are returned
// wrapped. ParseWAV never allocates from a size the file declares.
func ParseWAV(r io.Reader) (WAVInfo, error) {
	remaining := readerLen(r)
	h, err := readWAVHeader(r)
	if err != nil {
		return WAVInfo{}, err
	}
	return h.finish(remaining)
}

// readerLen returns how many bytes r has left to read, or -1 when that is
// not known.
func readerLen(r io.Reader) int64 {
	if l, ok := r.(interface{ Len() int }); ok {
		return int64(l.Len())
	}
	size := int64(-1)
	switch v := r.(type) {
	case interface{ Size() int64 }:
		size = v.Size()
	case interface {
		Stat() (fs.FileInfo, error)
	}:
		if fi, err := v.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
	}
	sk, ok := r.(io.Seeker)
	if size < 0 || !ok {
		return -1
	}
	pos, err := sk.Seek(0, io.SeekCurrent)
	if err != nil || pos < 0 || pos > size {
		return -1
	}
	return size - pos
}

// wavHeader is what readWAVHeader found, before the data length is settled.
type wavHeader struct {
	info       WAVInfo // format fields only
	byteRate   int64
	dataOffset int64 // offset of the first audio byte
	declared   int64 // the data chunk's declared size; -1 when left unset
}

// finish settles the data length given total, the length of the whole
// stream from where the header started (-1 when unknown).
func (h wavHeader) finish(total int64) (WAVInfo, error) {
	info := h.info
	present := int64(-1)
	if total >= 0 {
		present = max(total-h.dataOffset, 0)
	}
	switch {
	case h.declared < 0 && present < 0:
		info.DataBytes = -1
		return info, &WAVError{Reason: WAVUnknownLength, Offset: h.dataOffset - 4,
			Detail: "data chunk size is unset (streamed WAV) and the length of the stream is unknown"}
	case h.declared < 0:
		info.DataBytes = present
	case present >= 0 && present < h.declared:
		info.DataBytes = present
	default:
		info.DataBytes = h.declared
	}
	d, ok := durationOf(info.DataBytes, h.byteRate)
	if !ok {
		return WAVInfo{}, &WAVError{Reason: WAVInvalidSize, Offset: h.dataOffset - 4,
			Detail: fmt.Sprintf("%d data bytes at %d bytes per second is too long for a duration", info.DataBytes, h.byteRate)}
	}
	info.Duration = d
	return info, nil
}

// durationOf is bytes/byteRate seconds, rounded down to the nanosecond,
// without overflowing an intermediate product; ok is false when the result
// does not fit in a time.Duration.
func durationOf(bytes, byteRate int64) (time.Duration, bool) {
	secs, rem := bytes/byteRate, bytes%byteRate
	if secs > (math.MaxInt64-int64(time.Second))/int64(time.Second) {
		return 0, false
	}
	// rem < byteRate <= 2^32, so rem*1e9 < 2^62.
	return time.Duration(secs)*time.Second + time.Duration(rem*int64(time.Second)/byteRate), true
}

// wavReader reads a WAV header through a fixed buffer, counting its offset.
type wavReader struct {
	r   io.Reader
	off int64
	buf [40]byte
}

// read fills and returns the first n bytes of the buffer (n <= 40). The
// stream ending early is a WAVTruncated error naming what was being read.
func (w *wavReader) read(n int, what string) ([]byte, error) {
	got, err := io.ReadFull(w.r, w.buf[:n])
	w.off += int64(got)
	if err != nil {
		return w.buf[:got], w.fail(err, what)
	}
	return w.buf[:n], nil
}

// skip reads through n bytes without keeping them.
func (w *wavReader) skip(n int64, what string) error {
	if n <= 0 {
		return nil
	}
	got, err := io.CopyN(io.Discard, w.r, n)
	w.off += got
	if err != nil {
		return w.fail(err, what)
	}
	return nil
}

func (w *wavReader) fail(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &WAVError{Reason: WAVTruncated, Offset: w.off, Detail: "stream ends inside " + what}
	}
	return fmt.Errorf("reading WAV %s at byte %d: %w", what, w.off, err)
}

// readWAVHeader reads from r up to and including the data chunk header.
func readWAVHeader(r io.Reader) (wavHeader, error) {
	w := &wavReader{r: r}
	var h wavHeader

	got, err := io.ReadFull(w.r, w.buf[:12])
	w.off += int64(got)
	if got >= 4 && !bytes.Equal(w.buf[:4], []byte("RIFF")) && !bytes.Equal(w.buf[:4], []byte("RF64")) {
		return h, &WAVError{Reason: WAVNotRIFF, Detail: fmt.Sprintf("starts with %q, not \"RIFF\"", w.buf[:4])}
	}
	if err != nil {
		return h, w.fail(err, "the RIFF header")
	}
	rf64 := bytes.Equal(w.buf[:4], []byte("RF64"))
	riffSize := binary.LittleEndian.Uint32(w.buf[4:8])
	riffUnset := riffSize == 0 || riffSize == streamedSize
	if form := w.buf[8:12]; !bytes.Equal(form, []byte("WAVE")) {
		return h, &WAVError{Reason: WAVNotRIFF, Offset: 8, Detail: fmt.Sprintf("RIFF form type is %q, not \"WAVE\"", form)}
	}

	fmtSeen := false
	ds64Data := int64(-1)
	for chunk := 0; ; chunk++ {
		start := w.off
		got, err := io.ReadFull(w.r, w.buf[:8])
		w.off += int64(got)
		if errors.Is(err, io.EOF) { // clean end between chunks
			if !fmtSeen {
				return h, &WAVError{Reason: WAVMissingFmt, Offset: w.off, Detail: "stream ends without a fmt chunk"}
			}
			return h, &WAVError{Reason: WAVMissingData, Offset: w.off, Detail: "stream ends without a data chunk"}
		}
		if err != nil {
			return h, w.fail(err, "a chunk header")
		}
		id := string(w.buf[:4])
		size := binary.LittleEndian.Uint32(w.buf[4:8])
		body := int64(size) + int64(size&1) // with the pad byte
		if rf64 && chunk == 0 && id != "ds64" {
			return h, &WAVError{Reason: WAVInvalidSize, Offset: start, Detail: fmt.Sprintf("RF64 file's first chunk is %q, not \"ds64\"", id)}
		}

		switch id {
		case "ds64":
			if !rf64 || chunk != 0 {
				break // meaningless outside RF64's first chunk: skip it
			}
			if size < 24 {
				return h, &WAVError{Reason: WAVInvalidSize, Offset: start, Detail: fmt.Sprintf("ds64 chunk is %d bytes, fewer than 24", size)}
			}
			b, err := w.read(24, "the ds64 chunk")
			if err != nil {
				return h, err
			}
			ds := binary.LittleEndian.Uint64(b[8:16])
			if ds > math.MaxInt64 {
				return h, &WAVError{Reason: WAVInvalidSize, Offset: start + 16, Detail: fmt.Sprintf("ds64 data size %d is too large", ds)}
			}
			ds64Data = int64(ds)
			if err := w.skip(body-24, "the ds64 chunk"); err != nil {
				return h, err
			}
			continue

		case "fmt ":
			if fmtSeen {
				break // the first fmt chunk rules; skip any other
			}
			if size < 16 {
				return h, &WAVError{Reason: WAVInvalidFmt, Offset: start, Detail: fmt.Sprintf("fmt chunk is %d bytes, fewer than 16", size)}
			}
			n := int(min(size, 40))
			b, err := w.read(n, "the fmt chunk")
			if err != nil {
				return h, err
			}
			if err := parseFmt(&h, b, start); err != nil {
				return h, err
			}
			fmtSeen = true
			if err := w.skip(body-int64(n), "the fmt chunk"); err != nil {
				return h, err
			}
			continue

		case "data":
			if !fmtSeen {
				return h, &WAVError{Reason: WAVMissingFmt, Offset: start, Detail: "data chunk comes before any fmt chunk"}
			}
			h.dataOffset = w.off
			switch {
			case rf64 && size == streamedSize && ds64Data >= 0:
				h.declared = ds64Data
			case size == streamedSize || (size == 0 && riffUnset):
				h.declared = -1
			default:
				h.declared = int64(size)
			}
			return h, nil
		}

		if err := w.skip(body, fmt.Sprintf("the %q chunk", id)); err != nil {
			return h, err
		}
	}
}

// parseFmt reads the fields of a fmt chunk body b (16 to 40 bytes) found at
// offset start.
func parseFmt(h *wavHeader, b []byte, start int64) error {
	le := binary.LittleEndian
	tag := le.Uint16(b[0:2])
	channels := le.Uint16(b[2:4])
	rate := le.Uint32(b[4:8])
	byteRate := le.Uint32(b[8:12])
	bits := le.Uint16(b[14:16])

	if tag == tagExtensible {
		if len(b) < 40 {
			return &WAVError{Reason: WAVInvalidFmt, Offset: start,
				Detail: fmt.Sprintf("WAVE_FORMAT_EXTENSIBLE fmt chunk is %d bytes, fewer than 40", len(b))}
		}
		guid := b[24:40]
		if !bytes.Equal(guid[2:], ksDataFormatSuffix) {
			return &WAVError{Reason: WAVUnsupportedEncoding, Offset: start + 8 + 24,
				Detail: fmt.Sprintf("sub-format GUID % x is not a KSDATAFORMAT_SUBTYPE", guid)}
		}
		tag = le.Uint16(guid[0:2])
	}
	var enc Encoding
	switch tag {
	case tagPCM:
		enc = EncodingPCM
	case tagFloat:
		enc = EncodingFloat
	case tagALaw:
		enc = EncodingALaw
	case tagMuLaw:
		enc = EncodingMuLaw
	default:
		return &WAVError{Reason: WAVUnsupportedEncoding, Offset: start + 8,
			Detail: fmt.Sprintf("format tag 0x%04x is not PCM, IEEE float, A-law or µ-law", tag)}
	}
	switch {
	case channels == 0:
		return &WAVError{Reason: WAVInvalidFmt, Offset: start + 10, Detail: "fmt chunk states 0 channels"}
	case rate == 0:
		return &WAVError{Reason: WAVInvalidFmt, Offset: start + 12, Detail: "fmt chunk states a sample rate of 0"}
	case byteRate == 0:
		return &WAVError{Reason: WAVZeroByteRate, Offset: start + 16, Detail: "fmt chunk states a byte rate of 0"}
	case bits == 0:
		return &WAVError{Reason: WAVInvalidFmt, Offset: start + 22, Detail: "fmt chunk states 0 bits per sample"}
	}
	h.info = WAVInfo{SampleRate: int(rate), Channels: int(channels), BitsPerSample: int(bits), Encoding: enc}
	h.byteRate = int64(byteRate)
	return nil
}
