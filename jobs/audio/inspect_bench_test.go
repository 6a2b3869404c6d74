package audio

import (
	"context"
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
