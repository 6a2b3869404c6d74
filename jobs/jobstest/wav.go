package jobstest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// WriteWAV writes a 16 kHz mono 16-bit WAV of the given length whose
// samples depend on seed (so every file has its own digest), creating
// path's directory.
func WriteWAV(t testing.TB, path string, d time.Duration, seed int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, WAV(d, seed), 0o600); err != nil {
		t.Fatal(err)
	}
}

// WAV is the WAV file WriteWAV writes.
func WAV(d time.Duration, seed int) []byte {
	const rate = 16000
	n := int(d.Seconds() * rate)
	data := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(data[2*i:], uint16((i*seed)%2000))
	}
	var b []byte
	b = append(b, "RIFF"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(36+len(data)))
	b = append(b, "WAVEfmt "...)
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint32(b, rate)
	b = binary.LittleEndian.AppendUint32(b, rate*2)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// FileDigest is the hex SHA-256 of the file at path: the digest the
// ledger keys a recording's audio by.
func FileDigest(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
