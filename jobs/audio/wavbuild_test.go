package audio

import (
	"bytes"
	"encoding/binary"
)

// This file builds WAV files for the tests, byte by byte, independently of
// the parser.

// chunk is one RIFF chunk. size is what the header states; body is what
// follows (a pad byte is added after an odd-sized body unless noPad).
type chunk struct {
	id    string
	size  uint32
	body  []byte
	noPad bool
}

// raw returns a chunk whose header states len(body).
func raw(id string, body []byte) chunk {
	return chunk{id: id, size: uint32(len(body)), body: body}
}

// fmtSpec is what a fmt chunk states.
type fmtSpec struct {
	tag        uint16
	channels   uint16
	rate       uint32
	byteRate   uint32
	blockAlign uint16
	bits       uint16
	extensible bool   // write WAVE_FORMAT_EXTENSIBLE with tag as the sub-format
	cbSize     bool   // write the 2-byte cbSize field (an 18-byte fmt chunk)
	validBits  uint16 // for extensible; bits when 0
}

// pcm returns a consistent PCM fmtSpec.
func pcm(rate, channels, bits int) fmtSpec {
	return spec(tagPCM, rate, channels, bits)
}

// spec returns a consistent fmtSpec for tag.
func spec(tag uint16, rate, channels, bits int) fmtSpec {
	ba := channels * bits / 8
	return fmtSpec{
		tag: tag, channels: uint16(channels), rate: uint32(rate),
		byteRate: uint32(rate * ba), blockAlign: uint16(ba), bits: uint16(bits),
	}
}

func (f fmtSpec) chunk() chunk {
	var b bytes.Buffer
	le := binary.LittleEndian
	tag := f.tag
	if f.extensible {
		tag = tagExtensible
	}
	_ = binary.Write(&b, le, tag)
	_ = binary.Write(&b, le, f.channels)
	_ = binary.Write(&b, le, f.rate)
	_ = binary.Write(&b, le, f.byteRate)
	_ = binary.Write(&b, le, f.blockAlign)
	_ = binary.Write(&b, le, f.bits)
	switch {
	case f.extensible:
		valid := f.validBits
		if valid == 0 {
			valid = f.bits
		}
		_ = binary.Write(&b, le, uint16(22))
		_ = binary.Write(&b, le, valid)
		_ = binary.Write(&b, le, uint32(0x4)) // channel mask: front centre
		_ = binary.Write(&b, le, f.tag)
		b.Write(ksDataFormatSuffix)
	case f.cbSize:
		_ = binary.Write(&b, le, uint16(0))
	}
	return raw("fmt ", b.Bytes())
}

// data returns a data chunk of n bytes of a recognisable pattern.
func data(n int) chunk {
	body := make([]byte, n)
	for i := range body {
		body[i] = byte(i*7 + 3)
	}
	return raw("data", body)
}

// streamed returns a data chunk of n bytes whose header states size (0 or
// 0xFFFFFFFF for a streamed WAV).
func streamed(n int, size uint32) chunk {
	c := data(n)
	c.size = size
	return c
}

// list returns a LIST/INFO chunk with an odd-length title, so its size is
// odd and it is followed by a pad byte.
func list() chunk {
	body := []byte("INFOINAM")
	title := []byte("rate sheet\x00") // 11 bytes: odd
	body = binary.LittleEndian.AppendUint32(body, uint32(len(title)))
	body = append(body, title...)
	return raw("LIST", body)
}

// wav encodes a RIFF/WAVE file of chunks.
func wav(chunks ...chunk) []byte {
	return riff("RIFF", "WAVE", chunks...)
}

// riff encodes a RIFF-style file with the given magic and form type. The
// RIFF size is computed from what is written.
func riff(magic, form string, chunks ...chunk) []byte {
	var body bytes.Buffer
	body.WriteString(form)
	for _, c := range chunks {
		body.WriteString(c.id)
		_ = binary.Write(&body, binary.LittleEndian, c.size)
		body.Write(c.body)
		if len(c.body)%2 == 1 && !c.noPad {
			body.WriteByte(0)
		}
	}
	out := []byte(magic)
	out = binary.LittleEndian.AppendUint32(out, uint32(body.Len()))
	return append(out, body.Bytes()...)
}

// ds64 returns an RF64 ds64 chunk stating dataSize.
func ds64(riffSize, dataSize uint64) chunk {
	var b []byte
	b = binary.LittleEndian.AppendUint64(b, riffSize)
	b = binary.LittleEndian.AppendUint64(b, dataSize)
	b = binary.LittleEndian.AppendUint64(b, 0) // sample count
	b = binary.LittleEndian.AppendUint32(b, 0) // table length
	return raw("ds64", b)
}

// unsetRIFF returns the file b with its RIFF size set to size, as a
// streaming writer leaves it (0 or 0xFFFFFFFF).
func unsetRIFF(b []byte, size uint32) []byte {
	out := bytes.Clone(b)
	binary.LittleEndian.PutUint32(out[4:8], size)
	return out
}
