package audio

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkInspect is ingest's read of one recording under a directory
// root, inside a tenant's confinement directory: the path walked through
// its *os.Root once, the file opened, hashed and measured.
func BenchmarkInspect(b *testing.B) {
	dir := b.TempDir()
	const files = 100
	keys := make([]string, files)
	body := make([]byte, 4096)
	if err := os.MkdirAll(filepath.Join(dir, "acme", "2026"), 0o750); err != nil {
		b.Fatal(err)
	}
	for i := range keys {
		keys[i] = fmt.Sprintf("acme/2026/call-%d.bin", i)
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(keys[i])), body, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	s, err := Open(context.Background(), Config{URL: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Inspect(context.Background(), keys[i%files]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionInspect is what ingest does for each recording of a
// chunk (Name): the manifest's path turned into a key and the WAV file
// read (digest, size, duration) through one Session, whose directories
// stay open across the chunk; and the same with Key, whose walk of the
// key Inspect makes again.
func BenchmarkSessionInspect(b *testing.B) {
	dir, paths := benchWAVs(b)
	files := len(paths)
	s, err := Open(context.Background(), Config{URL: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ss := s.Session()
	defer func() { _ = ss.Close() }()
	for _, c := range []struct {
		name string
		key  func(string) (string, error)
	}{{"Name", ss.Name}, {"Key", ss.Key}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				k, err := c.key(paths[i%files])
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ss.Inspect(context.Background(), k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadFileDigest is the baseline of BenchmarkSessionInspect:
// what a hand-rolled ingest does for a recording, os.ReadFile of its path
// and the SHA-256 of the bytes, without confinement, size limit or WAV
// header.
func BenchmarkReadFileDigest(b *testing.B) {
	dir, paths := benchWAVs(b)
	for i := range paths {
		paths[i] = filepath.Join(dir, filepath.FromSlash(paths[i]))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		raw, err := os.ReadFile(paths[i%len(paths)])
		if err != nil {
			b.Fatal(err)
		}
		_ = sha256.Sum256(raw)
	}
}

// benchWAVs writes 100 quarter-second WAV files under a new directory and
// returns it and their paths under it (slash-separated).
func benchWAVs(b *testing.B) (string, []string) {
	dir := b.TempDir()
	paths := make([]string, 100)
	body := wav(pcm(8000, 1, 16).chunk(), data(4000))
	if err := os.MkdirAll(filepath.Join(dir, "acme", "2026"), 0o750); err != nil {
		b.Fatal(err)
	}
	for i := range paths {
		paths[i] = fmt.Sprintf("acme/2026/call-%d.wav", i)
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(paths[i])), body, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return dir, paths
}
