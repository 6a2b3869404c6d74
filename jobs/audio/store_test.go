package audio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "gocloud.dev/blob/memblob" // mem:// stands in for a cloud bucket
)

// bundle is what the Store tests need.
type bundle struct {
	ctx   context.Context
	store *Store
	dir   string                                                              // the root directory, symbolic links resolved
	open  func(ctx context.Context, key string) (io.ReadCloser, int64, error) // the store's own
}

// setup opens a Store on a fresh directory with cfg (whose URL it fills in
// when empty).
func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URL == "" {
		cfg.URL = "file://" + dir
	}
	ctx := context.Background()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open(%+v) error = %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() error = %v", err)
		}
	})
	return &bundle{ctx: ctx, store: s, dir: dir, open: s.open}
}

// write creates the file rel (slash-separated) under the root.
func (b *bundle) write(t *testing.T, rel string, content []byte) string {
	t.Helper()
	p := filepath.Join(b.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// countReads makes the store count every byte read from the bucket, and
// optionally hide the object's size, as a bucket that does not state it
// would. It replaces what an earlier call set up.
func (b *bundle) countReads(hideSize bool) *atomic.Int64 {
	var n atomic.Int64
	b.store.open = func(ctx context.Context, key string) (io.ReadCloser, int64, error) {
		rc, size, err := b.open(ctx, key)
		if err != nil {
			return nil, 0, err
		}
		if hideSize {
			size = -1
		}
		return countingReadCloser{rc: rc, n: &n}, size, nil
	}
	return &n
}

type countingReadCloser struct {
	rc io.ReadCloser
	n  *atomic.Int64
}

func (c countingReadCloser) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c countingReadCloser) Close() error { return c.rc.Close() }

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestInspect(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})

	speech := wav(pcm(16000, 1, 16).chunk(), list(), data(3*32000+2))
	streamedWAV := unsetRIFF(wav(pcm(8000, 1, 8).chunk(), streamed(12000, streamedSize)), streamedSize)
	notWAV := []byte("ID3\x04 this is an mp3, honest")
	badWAV := wav(pcm(16000, 1, 16).chunk())[:30]

	tests := []struct {
		key     string
		content []byte
		want    Info
	}{
		{"northline/2026/11/call-1001.wav", speech, Info{Format: "wav", Duration: 3*time.Second + 62500*time.Nanosecond}},
		{"harbor/streamed.wav", streamedWAV, Info{Format: "wav", Duration: 1500 * time.Millisecond}},
		{"ridgeway/call.mp3", notWAV, Info{}},
		{"ridgeway/truncated.wav", badWAV, Info{}},
		{"empty.raw", nil, Info{}},                       // an extension Inspect does not check
		{"northline/text.WAVX", []byte("hello"), Info{}}, // likewise
	}
	for _, tt := range tests {
		b.write(t, tt.key, tt.content)
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			got, err := b.store.Inspect(b.ctx, tt.key)
			if err != nil {
				t.Fatalf("Inspect() error = %v", err)
			}
			want := tt.want
			want.Key, want.SHA256, want.Bytes = tt.key, sha(tt.content), int64(len(tt.content))
			if got != want {
				t.Errorf("Inspect() = %+v, want %+v", got, want)
			}
		})
	}
}

// Inspect reads the object once, in one pass.
func TestInspectReadsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	content := wav(pcm(16000, 1, 16).chunk(), data(100_000))
	b.write(t, "a.wav", content)
	n := b.countReads(false)
	if _, err := b.store.Inspect(b.ctx, "a.wav"); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != int64(len(content)) {
		t.Errorf("read %d bytes of a %d-byte object", got, len(content))
	}
}

func TestInspectNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	_, err := b.store.Inspect(b.ctx, "northline/missing.wav")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Inspect() error = %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), `"northline/missing.wav"`) {
		t.Errorf("error %q does not name the key", err)
	}
	if _, err := b.store.Open(b.ctx, "northline/missing.wav"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open() error = %v, want ErrNotFound", err)
	}
}

func TestInspectSizeLimit(t *testing.T) {
	t.Parallel()
	const limit = 4096
	b := setup(t, Config{MaxBytes: limit})
	atLimit := bytes.Repeat([]byte{'a'}, limit)
	over := bytes.Repeat([]byte{'b'}, limit+1)
	huge := wav(pcm(8000, 1, 8).chunk(), data(100*limit))
	b.write(t, "at-limit.raw", atLimit)
	b.write(t, "over.raw", over)
	b.write(t, "huge.wav", huge)

	for _, hideSize := range []bool{false, true} {
		n := b.countReads(hideSize)

		info, err := b.store.Inspect(b.ctx, "at-limit.raw")
		if err != nil || info.Bytes != limit || info.SHA256 != sha(atLimit) {
			t.Errorf("hideSize=%v: Inspect(at limit) = %+v, %v", hideSize, info, err)
		}

		for _, key := range []string{"over.raw", "huge.wav"} {
			n.Store(0)
			_, err := b.store.Inspect(b.ctx, key)
			var tle *TooLargeError
			if !errors.Is(err, ErrTooLarge) || !errors.As(err, &tle) {
				t.Fatalf("hideSize=%v: Inspect(%s) error = %v, want a TooLargeError", hideSize, key, err)
			}
			if tle.Limit != limit || tle.Key != key {
				t.Errorf("hideSize=%v: TooLargeError = %+v", hideSize, tle)
			}
			read := n.Load()
			if hideSize {
				// Cut off while reading, after at most one byte too many.
				if tle.Size != -1 || read > limit+1 {
					t.Errorf("hideSize=%v: %s: size %d, read %d bytes, limit %d", hideSize, key, tle.Size, read, limit)
				}
			} else if read != 0 {
				// Refused on its stated size before reading.
				t.Errorf("hideSize=%v: %s: read %d bytes before refusing a too-large object", hideSize, key, read)
			}
			if !strings.Contains(err.Error(), "4096-byte limit") {
				t.Errorf("error %q does not state the limit", err)
			}
		}
	}
}

func TestOpenReader(t *testing.T) {
	t.Parallel()
	const limit = 1000
	b := setup(t, Config{MaxBytes: limit})
	small := bytes.Repeat([]byte{1}, 999)
	b.write(t, "small", small)
	b.write(t, "big", bytes.Repeat([]byte{2}, 5000))
	n := b.countReads(true)

	rc, err := b.store.Open(b.ctx, "small")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, small) {
		t.Errorf("ReadAll(small) = %d bytes, %v", len(got), err)
	}
	_ = rc.Close()

	n.Store(0)
	rc, err = b.store.Open(b.ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(rc)
	if !errors.Is(err, ErrTooLarge) || len(got) != limit {
		t.Errorf("ReadAll(big) = %d bytes, %v; want %d bytes and ErrTooLarge", len(got), err, limit)
	}
	if _, err := rc.Read(make([]byte, 10)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read after the limit: %v, want ErrTooLarge again", err)
	}
	if read := n.Load(); read > limit+1 {
		t.Errorf("read %d bytes with a %d-byte limit", read, limit)
	}
	_ = rc.Close()

	// With the size known, Open refuses up front.
	b.countReads(false)
	if _, err := b.store.Open(b.ctx, "big"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Open(big) error = %v, want ErrTooLarge", err)
	}
}

func TestInspectContextCanceled(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.write(t, "a.wav", wav(pcm(16000, 1, 16).chunk(), data(1000)))
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	if _, err := b.store.Inspect(ctx, "a.wav"); !errors.Is(err, context.Canceled) {
		t.Errorf("Inspect(canceled) error = %v, want context.Canceled", err)
	}
}

func TestKey(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.wav"), []byte("RIFF"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.write(t, "northline/2026/call-1001.wav", []byte("RIFF"))
	mustSymlink(t, filepath.Join(outside, "secret.wav"), filepath.Join(b.dir, "escape.wav"))
	mustSymlink(t, outside, filepath.Join(b.dir, "northline", "elsewhere"))
	mustSymlink(t, "2026/call-1001.wav", filepath.Join(b.dir, "northline", "latest.wav"))
	mustSymlink(t, "missing-target.wav", filepath.Join(b.dir, "dangling.wav"))
	// An absolute target is refused wherever it points (os.Root's rule).
	mustSymlink(t, filepath.Join(b.dir, "missing-target.wav"), filepath.Join(b.dir, "abs-dangling.wav"))
	mustSymlink(t, "../..", filepath.Join(b.dir, "northline", "up"))

	// The same root opened through a symbolic link to it.
	linkRoot := filepath.Join(t.TempDir(), "recordings")
	mustSymlink(t, b.dir, linkRoot)
	viaLink, err := Open(b.ctx, Config{URL: linkRoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = viaLink.Close() })

	accept := []struct {
		store *Store
		in    string
		want  string
	}{
		{b.store, "northline/2026/call-1001.wav", "northline/2026/call-1001.wav"},
		{b.store, "./northline/2026/../2026/call-1001.wav", "northline/2026/call-1001.wav"},
		{b.store, "northline/2026/not-yet.wav", "northline/2026/not-yet.wav"},
		{b.store, "new-tenant/deep/path/call.wav", "new-tenant/deep/path/call.wav"},
		{b.store, "northline/latest.wav", "northline/latest.wav"},
		{b.store, "call with spaces.wav", "call with spaces.wav"},
		{b.store, filepath.Join(b.dir, "northline", "2026", "call-1001.wav"), "northline/2026/call-1001.wav"},
		{b.store, b.dir + "/northline//2026/./call-1001.wav", "northline/2026/call-1001.wav"},
		{b.store, "file://" + b.dir + "/northline/2026/call-1001.wav", "northline/2026/call-1001.wav"},
		{b.store, "file://localhost" + b.dir + "/harbor/a%20b.wav", "harbor/a b.wav"},
		{viaLink, filepath.Join(linkRoot, "northline", "2026", "call-1001.wav"), "northline/2026/call-1001.wav"},
		{viaLink, filepath.Join(b.dir, "northline", "2026", "call-1001.wav"), "northline/2026/call-1001.wav"},
		{viaLink, "northline/latest.wav", "northline/latest.wav"},
	}
	for _, tt := range accept {
		got, err := tt.store.Key(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Key(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}

	refuse := []struct {
		in     string
		reason KeyReason
	}{
		{"../x", KeyOutsideRoot},
		{"..", KeyOutsideRoot},
		{"northline/../../x.wav", KeyOutsideRoot},
		{"/etc/passwd", KeyOutsideRoot},
		{"file:///etc/passwd", KeyOutsideRoot},
		{"file://otherhost" + b.dir + "/a.wav", KeyOutsideRoot},
		{b.dir + "/../x.wav", KeyOutsideRoot},
		{b.dir + "-sibling/x.wav", KeyOutsideRoot},
		{filepath.Join(outside, "secret.wav"), KeyOutsideRoot},
		{"escape.wav", KeyOutsideRoot},
		{filepath.Join(b.dir, "escape.wav"), KeyOutsideRoot},
		{"northline/elsewhere/secret.wav", KeyOutsideRoot},
		{"northline/elsewhere/not-there.wav", KeyOutsideRoot},
		{"northline/up/etc/passwd", KeyOutsideRoot},
		{"abs-dangling.wav", KeyOutsideRoot},
		{"s3://bucket/northline/a.wav", KeyOutsideRoot},
		{"", KeyInvalid},
		{".", KeyInvalid},
		{b.dir, KeyInvalid},
		{"a\x00b.wav", KeyInvalid},
		{"a\nb.wav", KeyInvalid},
		{"bad\xffutf8.wav", KeyInvalid},
		{"dangling.wav", KeyInvalid},
		{"a__0x41__.wav", KeyInvalid},
		{"file://" + b.dir + "/a.wav?x=1", KeyInvalid},
	}
	for _, tt := range refuse {
		got, err := b.store.Key(tt.in)
		var ke *KeyError
		if !errors.As(err, &ke) {
			t.Errorf("Key(%q) = %q, %v; want a KeyError", tt.in, got, err)
			continue
		}
		if ke.Reason != tt.reason || ke.Path != tt.in || ke.Root != "file://"+b.dir {
			t.Errorf("Key(%q): KeyError %+v, want reason %s, the path and root file://%s", tt.in, ke, tt.reason, b.dir)
		}
		if !strings.Contains(err.Error(), b.dir) {
			t.Errorf("Key(%q): error %q does not name the root", tt.in, err)
		}
	}
}

// Every method that takes a key holds it to Key's rules, so a key that did
// not come from Key cannot escape either.
func TestMethodsCheckKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.wav"), []byte("RIFF"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, filepath.Join(outside, "secret.wav"), filepath.Join(b.dir, "escape.wav"))
	for _, key := range []string{"escape.wav", "../x", "/etc/passwd", "a/./b", "a//b", ""} {
		var ke *KeyError
		if _, err := b.store.Inspect(b.ctx, key); !errors.As(err, &ke) {
			t.Errorf("Inspect(%q) error = %v, want a KeyError", key, err)
		}
		if _, err := b.store.Open(b.ctx, key); !errors.As(err, &ke) {
			t.Errorf("Open(%q) error = %v, want a KeyError", key, err)
		}
		if _, err := b.store.URL(b.ctx, key, time.Minute); !errors.As(err, &ke) {
			t.Errorf("URL(%q) error = %v, want a KeyError", key, err)
		}
	}
}

func TestURLFileRoot(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := b.write(t, "harbor/call 2001#1.wav", []byte("RIFF"))

	got, err := b.store.URL(b.ctx, "harbor/call 2001#1.wav", time.Minute)
	if err != nil {
		t.Fatalf("URL() error = %v", err)
	}
	if !strings.HasPrefix(got, "file:///") {
		t.Errorf("URL() = %q, want a file:/// URL", got)
	}
	u, err := url.Parse(got)
	if err != nil || u.Path != p {
		t.Errorf("URL() = %q parses to path %q (%v), want %q", got, u.Path, err, p)
	}
	// The URL leads back to the same key.
	if k, err := b.store.Key(got); err != nil || k != "harbor/call 2001#1.wav" {
		t.Errorf("Key(URL()) = %q, %v", k, err)
	}

	if _, err := b.store.URL(b.ctx, "harbor/missing.wav", time.Minute); !errors.Is(err, ErrNotFound) {
		t.Errorf("URL(missing) error = %v, want ErrNotFound", err)
	}
	if _, err := b.store.URL(b.ctx, "nowhere/missing.wav", time.Minute); !errors.Is(err, ErrNotFound) {
		t.Errorf("URL(missing directory) error = %v, want ErrNotFound", err)
	}
	// A link at the key's end is refused as Key refuses it, in the same walk.
	mustSymlink(t, "missing-target.wav", filepath.Join(b.dir, "harbor", "dangling.wav"))
	mustSymlink(t, filepath.Join(b.dir, "harbor", "missing-target.wav"), filepath.Join(b.dir, "harbor", "abs-dangling.wav"))
	for key, reason := range map[string]KeyReason{"harbor/dangling.wav": KeyInvalid, "harbor/abs-dangling.wav": KeyOutsideRoot} {
		var ke *KeyError
		if _, err := b.store.URL(b.ctx, key, time.Minute); !errors.As(err, &ke) || ke.Reason != reason {
			t.Errorf("URL(%q) error = %v, want a KeyError with reason %s", key, err, reason)
		}
	}
	if _, err := b.store.URL(b.ctx, "harbor/call 2001#1.wav", 0); err == nil {
		t.Error("URL(ttl 0) succeeded")
	}
}

// A cloud bucket (mem:// here, as no cloud is reachable) takes relative
// keys only and reads the same way.
func TestCloudRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, Config{URL: "mem://recordings", MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	content := wav(pcm(16000, 1, 16).chunk(), data(16000))
	if err := s.bucket.WriteAll(ctx, "ridgeway/call-3001.wav", content, nil); err != nil {
		t.Fatal(err)
	}

	if k, err := s.Key("./ridgeway/call-3001.wav"); err != nil || k != "ridgeway/call-3001.wav" {
		t.Errorf("Key(relative) = %q, %v", k, err)
	}
	for _, in := range []string{"/ridgeway/call-3001.wav", "file:///ridgeway/call-3001.wav", "mem://recordings/ridgeway/call-3001.wav", "../x"} {
		var ke *KeyError
		if _, err := s.Key(in); !errors.As(err, &ke) || ke.Reason != KeyOutsideRoot || ke.Root != "mem://recordings" {
			t.Errorf("Key(%q) error = %v, want KeyOutsideRoot naming mem://recordings", in, err)
		}
	}
	info, err := s.Inspect(ctx, "ridgeway/call-3001.wav")
	want := Info{Key: "ridgeway/call-3001.wav", SHA256: sha(content), Bytes: int64(len(content)), Format: "wav", Duration: 500 * time.Millisecond}
	if err != nil || info != want {
		t.Errorf("Inspect() = %+v, %v; want %+v", info, err, want)
	}
	if _, err := s.Inspect(ctx, "ridgeway/missing.wav"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Inspect(missing) error = %v, want ErrNotFound", err)
	}
	// memblob cannot sign URLs; the error says which recording.
	if _, err := s.URL(ctx, "ridgeway/call-3001.wav", time.Minute); err == nil || !strings.Contains(err.Error(), `"ridgeway/call-3001.wav"`) {
		t.Errorf("URL() error = %v, want a signing error naming the key", err)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url         string
		wantOpen    string // "" when an error is expected
		wantDisplay string
		wantDir     string
		wantErr     string // substring of the error
	}{
		{url: "file:///var/recordings", wantOpen: "file:///var/recordings", wantDisplay: "file:///var/recordings", wantDir: "/var/recordings"},
		{url: "file:///var/recordings/?metadata=skip", wantOpen: "file:///var/recordings?metadata=skip", wantDisplay: "file:///var/recordings", wantDir: "/var/recordings"},
		{url: "file://localhost/var/recordings", wantOpen: "file:///var/recordings", wantDisplay: "file:///var/recordings", wantDir: "/var/recordings"},
		{url: "/var/recordings", wantOpen: "file:///var/recordings", wantDisplay: "file:///var/recordings", wantDir: "/var/recordings"},
		{url: "recordings", wantOpen: "file://" + cwd + "/recordings", wantDisplay: "file://" + cwd + "/recordings", wantDir: cwd + "/recordings"},
		{url: "file://./recordings", wantOpen: "file://" + cwd + "/recordings", wantDisplay: "file://" + cwd + "/recordings", wantDir: cwd + "/recordings"},
		{url: "s3://bucket?region=us-east-1", wantOpen: "s3://bucket?region=us-east-1", wantDisplay: "s3://bucket"},
		{url: "S3://bucket/?region=us-east-1&prefix=calls/", wantOpen: "s3://bucket/?region=us-east-1&prefix=calls/", wantDisplay: "s3://bucket"},
		{url: "gs://bucket", wantOpen: "gs://bucket", wantDisplay: "gs://bucket"},
		{url: "azblob://container", wantOpen: "azblob://container", wantDisplay: "azblob://container"},
		{url: "", wantErr: "required"},
		{url: "s3://AKIA:wJalrXUtnFEMI@bucket?region=us-east-1", wantErr: "credentials do not belong"},
		{url: "ftp://host/recordings", wantErr: `scheme "ftp"`},
		{url: "s3://", wantErr: "no bucket"},
		{url: "s3://bucket/calls", wantErr: "?prefix=calls/"},
		{url: "gs://bucket?key=a.wav", wantErr: `"key" parameter`},
		{url: "file:///var/recordings?prefix=a/", wantErr: `"prefix" parameter`},
		{url: "file://host/var/recordings", wantErr: `host "host"`},
		{url: "file://", wantErr: "no directory"},
		{url: "file:///var/recordings#x", wantErr: "fragment"},
	}
	for _, tt := range tests {
		rt, err := Config{URL: tt.url}.WithDefaults().validate()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "Config.URL") {
				t.Errorf("validate(%q) error = %v, want one naming Config.URL and containing %q", tt.url, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "wJalr") {
				t.Errorf("validate(%q) error %q repeats the secret", tt.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("validate(%q) error = %v", tt.url, err)
			continue
		}
		if rt.open != tt.wantOpen || rt.display != tt.wantDisplay || rt.dir != tt.wantDir {
			t.Errorf("validate(%q) = %+v, want open %q, display %q, dir %q", tt.url, rt, tt.wantOpen, tt.wantDisplay, tt.wantDir)
		}
	}

	if got := (Config{}).WithDefaults().MaxBytes; got != MaxBytesDefault {
		t.Errorf("default MaxBytes = %d, want %d", got, MaxBytesDefault)
	}
	if _, err := (Config{URL: "/tmp", MaxBytes: -1}).validate(); err == nil || !strings.Contains(err.Error(), "Config.MaxBytes") {
		t.Errorf("negative MaxBytes: error = %v, want one naming Config.MaxBytes", err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := Open(ctx, Config{URL: "file://" + missing}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Open(missing dir) error = %v, want one naming it", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Config{URL: file}); err == nil {
		t.Error("Open(a regular file) succeeded")
	}
	s, err := Open(ctx, Config{URL: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if s.MaxBytes() != MaxBytesDefault || !strings.HasPrefix(s.Root(), "file:///") {
		t.Errorf("Open() = MaxBytes %d, Root %q", s.MaxBytes(), s.Root())
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// A read that fails midway is an error naming the key and the root, not a
// missing recording or a bad file.
func TestInspectReadError(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	boom := errors.New("connection reset by peer")
	header := wav(pcm(16000, 1, 16).chunk(), data(100))[:40]
	b.store.open = func(context.Context, string) (io.ReadCloser, int64, error) {
		return io.NopCloser(io.MultiReader(bytes.NewReader(header), failing{boom})), 1000, nil
	}
	_, err := b.store.Inspect(b.ctx, "harbor/call-2001.wav")
	if !errors.Is(err, boom) || errors.Is(err, ErrNotFound) {
		t.Fatalf("Inspect() error = %v, want the read error", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"harbor/call-2001.wav"`) || !strings.Contains(msg, "file://"+b.dir) {
		t.Errorf("error %q does not name the key and the root", msg)
	}

	b.store.open = func(context.Context, string) (io.ReadCloser, int64, error) { return nil, 0, boom }
	if _, err := b.store.Inspect(b.ctx, "harbor/call-2001.wav"); !errors.Is(err, boom) || !strings.Contains(err.Error(), `"harbor/call-2001.wav"`) {
		t.Errorf("Inspect() with a failing open: error = %v", err)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.wav"), []byte("RIFF"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := Open(ctx, Config{URL: "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Delete(ctx, "a.wav"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.wav")); !os.IsNotExist(err) {
		t.Fatalf("still there: %v", err)
	}
	if err := s.Delete(ctx, "a.wav"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	var keyErr *KeyError
	if err := s.Delete(ctx, "../outside.wav"); !errors.As(err, &keyErr) {
		t.Fatalf("delete outside the root: %v, want a KeyError", err)
	}
}
