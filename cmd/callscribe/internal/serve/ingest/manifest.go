package ingest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxManifestLine is the longest manifest line ingest reads, in bytes,
// without its line ending. A longer line is reported with its number and
// skipped; the lines after it are read on.
const MaxManifestLine = 64 << 10

// Line is one line of a manifest as read: its text, or tooLong when it
// ran past MaxManifestLine (its text is then empty).
type Line struct {
	text    string
	tooLong bool
}

// ManifestReader reads a manifest's lines (LF or CRLF), keeping at most
// MaxManifestLine bytes of each: its memory is one line's, whatever the
// manifest's length.
type ManifestReader struct {
	br   *bufio.Reader
	read int64 // bytes read so far
	done bool
}

// NewManifestReader reads the manifest r.
func NewManifestReader(r io.Reader) *ManifestReader {
	return &ManifestReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next line, or io.EOF after the last.
func (m *ManifestReader) Next() (Line, error) {
	if m.done {
		return Line{}, io.EOF
	}
	var buf []byte
	n := 0
	for {
		chunk, err := m.br.ReadSlice('\n')
		n += len(chunk)
		m.read += int64(len(chunk))
		if n <= MaxManifestLine+2 { // room for "\r\n"
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return Line{}, err
		}
		if errors.Is(err, io.EOF) {
			m.done = true
			if n == 0 {
				return Line{}, io.EOF
			}
		}
		text := strings.TrimSuffix(strings.TrimSuffix(string(buf), "\n"), "\r")
		if n > MaxManifestLine+2 || len(text) > MaxManifestLine {
			return Line{tooLong: true}, nil
		}
		return Line{text: text}, nil
	}
}

// Item parses the line as one JSON object with nothing after it but
// spaces.
func (l Line) Item() (Item, error) {
	var m Item
	if l.tooLong {
		return m, fmt.Errorf("line longer than %d bytes: skipped", MaxManifestLine)
	}
	dec := json.NewDecoder(strings.NewReader(l.text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return m, errors.New("data after the JSON object: one object per line")
	}
	return m, nil
}

// Blank reports whether the line holds nothing but spaces (skipped).
func (l Line) Blank() bool { return !l.tooLong && strings.TrimSpace(l.text) == "" }

// Read is how many bytes of the manifest have been read so far.
func (m *ManifestReader) Read() int64 { return m.read }
