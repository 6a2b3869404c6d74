package audio

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO, a directory or a socket under a directory root is refused at
// once, naming the key; a FIFO never blocks the read (nothing writes to it).
func TestInspectRefusesNonRegularFiles(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if err := syscall.Mkfifo(filepath.Join(b.dir, "pipe.wav"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(b.dir, "dir.wav"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A socket path must be short: bind it in a short temporary directory
	// and link it into the root.
	sockDir, err := os.MkdirTemp("", "cs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	ln, err := net.Listen("unix", filepath.Join(sockDir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	if err := os.Link(filepath.Join(sockDir, "s"), filepath.Join(b.dir, "sock.wav")); err != nil {
		t.Logf("cannot hard-link a socket here (%v); checking FIFO and directory only", err)
	}
	keys := []string{"pipe.wav", "dir.wav"}
	if _, err := os.Lstat(filepath.Join(b.dir, "sock.wav")); err == nil {
		keys = append(keys, "sock.wav")
	}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			for name, call := range map[string]func(context.Context) error{
				"Inspect": func(ctx context.Context) error { _, err := b.store.Inspect(ctx, key); return err },
				"Open": func(ctx context.Context) error {
					rc, err := b.store.Open(ctx, key)
					if err == nil {
						_ = rc.Close()
					}
					return err
				},
			} {
				ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
				done := make(chan error, 1)
				go func() { done <- call(ctx) }()
				var err error
				select {
				case err = <-done:
				case <-ctx.Done():
					t.Fatalf("%s(%q) did not return within 5s", name, key)
				}
				cancel()
				var ke *KeyError
				if !errors.As(err, &ke) || ke.Reason != KeyNotRegular {
					t.Fatalf("%s(%q) error = %v, want a *KeyError with reason %s", name, key, err, KeyNotRegular)
				}
				if !strings.Contains(err.Error(), `"`+key+`"`) || !strings.Contains(err.Error(), "not a regular file") {
					t.Errorf("%s(%q) error %q does not name the key and the problem", name, key, err)
				}
			}
		})
	}
}

// A recording whose extension names a container it does not start like is
// refused; one that matches, or whose extension is not checked, is read.
func TestInspectChecksContainer(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	tests := []struct {
		key     string
		content []byte
		ok      bool
	}{
		{"text.wav", []byte("this is a text file, not audio\n"), false},
		{"empty.wav", nil, false},
		{"upper.WAV", []byte("RIFX....WAVE"), false},
		{"riff-avi.wav", []byte("RIFF\x10\x00\x00\x00AVI LIST"), false},
		{"short-riff.wav", []byte("RIFF\x04\x00\x00\x00WAVE"), true}, // RIFF/WAVE, too short to measure: kept, duration unknown
		{"rf64.wav", []byte("RF64\xff\xff\xff\xffWAVEds64"), true},
		{"id3.mp3", []byte("ID3\x04\x00\x00\x00\x00\x00\x00"), true},
		{"frame.mp3", []byte{0xFF, 0xFB, 0x90, 0x64, 0x00}, true},
		{"text.mp3", []byte("<html>not an mp3</html>"), false},
		{"a.flac", []byte("fLaC\x00\x00\x00\x22"), true},
		{"b.flac", []byte("OggS\x00\x02"), false},
		{"a.ogg", []byte("OggS\x00\x02"), true},
		{"a.opus", []byte("RIFF\x04\x00\x00\x00WAVE"), false},
		{"a.m4a", []byte("\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00"), true},
		{"b.m4a", []byte("\x00\x00\x00\x20moov"), false},
		{"a.webm", []byte{0x1A, 0x45, 0xDF, 0xA3, 0x9F}, true},
		{"b.webm", []byte("webm?"), false},
		{"a.aac", []byte{0xFF, 0xF1, 0x50, 0x80}, true},
		{"a.amr", []byte("#!AMR\n"), true},
		{"a.pcm", []byte("anything at all"), true}, // not a checked extension: read as before
	}
	for _, tt := range tests {
		b.write(t, tt.key, tt.content)
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			info, err := b.store.Inspect(b.ctx, tt.key)
			if tt.ok {
				if err != nil {
					t.Fatalf("Inspect() error = %v", err)
				}
				if info.Bytes != int64(len(tt.content)) {
					t.Errorf("Inspect().Bytes = %d, want %d", info.Bytes, len(tt.content))
				}
				return
			}
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) {
				t.Fatalf("Inspect() error = %v, want a *FormatError", err)
			}
			if fe.Key != tt.key || !strings.Contains(err.Error(), `"`+tt.key+`"`) {
				t.Errorf("error %q does not name the key", err)
			}
		})
	}
}

// The checked extensions are the ones the speech adapters send.
func TestContainersListed(t *testing.T) {
	t.Parallel()
	c := Containers()
	for _, ext := range []string{".wav", ".mp3", ".flac", ".ogg", ".m4a", ".webm"} {
		if c[ext] == "" {
			t.Errorf("Containers() has no %s", ext)
		}
	}
}
