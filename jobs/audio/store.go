package audio

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/fileblob"  // file://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/s3blob"    // s3://
	"gocloud.dev/gcerrors"
)

// Store reads recordings from one root. It is safe for concurrent use.
type Store struct {
	bucket   *blob.Bucket
	maxBytes int64
	root     string // the root as a URL without query: safe to log
	dir      string // a file root's directory as configured; "" for a cloud bucket
	dirReal  string // dir with symbolic links resolved
	// fsRoot is a directory root opened with os.Root: every stat, open and
	// remove of a recording goes through it (see within). nil for a cloud
	// bucket.
	fsRoot *os.Root

	// open returns a reader for key and the object's stated size (-1 when
	// unknown). It is the bucket's, replaced in tests to count bytes read.
	open func(ctx context.Context, key string) (io.ReadCloser, int64, error)
}

// Open opens the recordings root that cfg names. A directory root must
// exist. Opening a cloud bucket does not read from it, so a wrong bucket name
// shows on the first read; the driver does look for credentials, the way its
// SDK does (the GCS driver, for one, may ask the cloud's metadata server).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	rt, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	s := &Store{maxBytes: cfg.MaxBytes, root: rt.display, dir: rt.dir}
	if rt.dir != "" {
		resolved, err := filepath.EvalSymlinks(rt.dir)
		if err != nil {
			return nil, fmt.Errorf("audio: opening recordings root %s: %w", rt.display, err)
		}
		s.dirReal = resolved
	}
	b, err := blob.OpenBucket(ctx, rt.open)
	if err != nil {
		return nil, fmt.Errorf("audio: opening recordings root %s: %w", rt.display, err)
	}
	if rt.dir != "" {
		if s.fsRoot, err = os.OpenRoot(s.dirReal); err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("audio: opening recordings root %s: %w", rt.display, err)
		}
	}
	s.bucket = b
	s.open = s.openBlob
	if rt.dir != "" {
		s.open = s.openFile
	}
	return s, nil
}

// Close releases the bucket (and a directory root's open directory).
func (s *Store) Close() error {
	err := s.bucket.Close()
	if s.fsRoot != nil {
		err = errors.Join(err, s.fsRoot.Close())
	}
	if err != nil {
		return fmt.Errorf("audio: closing recordings root %s: %w", s.root, err)
	}
	return nil
}

// Root returns the recordings root as a URL without its query, safe to log.
func (s *Store) Root() string { return s.root }

// MaxBytes returns the size limit in force.
func (s *Store) MaxBytes() int64 { return s.maxBytes }

// Info describes one recording, as Inspect read it.
type Info struct {
	// Key is the recording's bucket key.
	Key string
	// SHA256 is the lower-case hex SHA-256 of the whole object.
	SHA256 string
	// Bytes is the object's size, counted while reading.
	Bytes int64
	// Duration is the audio's duration from the WAV header (see ParseWAV);
	// 0 when the object is not a WAV file ParseWAV can measure.
	Duration time.Duration
	// Format is "wav" when the object is a WAV file ParseWAV can measure,
	// and "" otherwise.
	Format string
}

// Inspect reads the recording at key once and returns its digest, size and,
// for a WAV file, its duration: the SHA-256 and the byte count are computed
// while the WAV header is parsed from the same stream, and the rest is read
// through to finish the digest. A recording whose extension names an audio
// container it does not start like (a ".wav" that is not RIFF/WAVE, an
// ".mp3" that is neither ID3 nor an MPEG frame, ...) is a *FormatError; see
// Containers. An extension not in that table is not checked. A recording over the size limit is a
// *TooLargeError, refused before reading when its stated size is over, and
// cut off after MaxBytes+1 bytes otherwise. A missing one is ErrNotFound.
func (s *Store) Inspect(ctx context.Context, key string) (Info, error) {
	lr, err := s.openLimited(ctx, key)
	if err != nil {
		return Info{}, err
	}
	defer func() { _ = lr.Close() }()
	info, err := s.digest(ctx, key, lr)
	if err != nil {
		return Info{}, err
	}
	return info, nil
}

// digestBuffer is digest's read buffer: a WAV header fits it, and the
// reads after it are as large as the copy's (bufio passes them through).
const digestBuffer = 4 << 10

// digestReaders keeps digest's buffered readers for the next recording:
// an ingest inspects thousands a second, and a new 4 KiB buffer for each
// was a quarter of what an ingest allocated.
var digestReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, digestBuffer) }}

// digest reads r to its end, computing Info for key.
func (s *Store) digest(ctx context.Context, key string, r io.Reader) (Info, error) {
	h := sha256.New()
	var n byteCounter
	var head headWriter
	// Buffered: the WAV header is parsed a few bytes at a time, and each
	// of those reads would be a system call of its own on a file. The
	// digest still sees exactly the bytes read through the tee.
	br := digestReaders.Get().(*bufio.Reader)
	br.Reset(ctxReader{ctx: ctx, r: r})
	defer func() {
		br.Reset(nil) // holds nothing of this recording's reader
		digestReaders.Put(br)
	}()
	tee := io.TeeReader(br, io.MultiWriter(h, &n, &head))

	hdr, werr := readWAVHeader(tee)
	var wavErr *WAVError
	if werr != nil && !errors.As(werr, &wavErr) {
		return Info{}, s.readError(key, werr)
	}
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return Info{}, s.readError(key, err)
	}

	info := Info{Key: key, SHA256: hex.EncodeToString(h.Sum(nil)), Bytes: int64(n)}
	if werr == nil {
		if w, err := hdr.finish(int64(n)); err == nil {
			info.Format, info.Duration = "wav", w.Duration
		}
	}
	if err := checkContainer(key, head.b); err != nil {
		return Info{}, err
	}
	return info, nil
}

// Open returns a reader for the recording at key that fails with a
// *TooLargeError instead of reading past the size limit. A recording whose
// stated size is over the limit is refused here, before any byte is read. A
// missing one is ErrNotFound. The caller closes the reader.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.openLimited(ctx, key)
}

func (s *Store) openLimited(ctx context.Context, key string) (*limitedReader, error) {
	if err := s.checkKeyText(key); err != nil {
		return nil, err
	}
	rc, size, err := s.open(ctx, key)
	if err != nil {
		return nil, s.readError(key, err)
	}
	if size > s.maxBytes {
		_ = rc.Close()
		return nil, &TooLargeError{Key: key, Limit: s.maxBytes, Size: size}
	}
	return &limitedReader{rc: rc, left: s.maxBytes, key: key, limit: s.maxBytes}, nil
}

// openBlob is the default Store.open.
func (s *Store) openBlob(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, 0, err
	}
	return r, r.Size(), nil
}

// readError translates an error from the bucket or the stream.
func (s *Store) readError(key string, err error) error {
	var tooLarge *TooLargeError
	var keyErr *KeyError
	switch {
	case errors.As(err, &tooLarge):
		return tooLarge
	case errors.As(err, &keyErr):
		return keyErr
	case errors.Is(err, ErrNotFound):
		return err
	case gcerrors.Code(err) == gcerrors.NotFound:
		return fmt.Errorf("audio: recording %q in %s: %w", key, s.root, ErrNotFound)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("audio: reading recording %q: %w", key, err)
	default:
		return fmt.Errorf("audio: reading recording %q from %s: %w", key, s.root, err)
	}
}

// URL returns a URL from which a speech vendor can fetch the recording at
// key. For a directory root it is the file's "file:///abs/path" URL (ttl is
// not used); for a cloud bucket it is a URL signed for GET that expires
// after ttl, which must be positive. A missing recording is ErrNotFound.
// The returned URL may carry credentials: do not log it.
func (s *Store) URL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if err := s.checkKeyText(key); err != nil {
		return "", err
	}
	if ttl <= 0 {
		return "", fmt.Errorf("audio: URL for recording %q: ttl is %v, must be positive", key, ttl)
	}
	if s.dir != "" {
		// Through the key's confinement directory, as every read is, with
		// checkKey's refusals, in one walk.
		if err := s.statConfined(key, nil); err != nil {
			return "", s.readError(key, err)
		}
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(s.dir, filepath.FromSlash(key)))}
		return u.String(), nil
	}
	ok, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return "", s.readError(key, err)
	}
	if !ok {
		return "", fmt.Errorf("audio: recording %q in %s: %w", key, s.root, ErrNotFound)
	}
	signed, err := s.bucket.SignedURL(ctx, key, &blob.SignedURLOptions{Expiry: ttl, Method: http.MethodGet})
	if err != nil {
		return "", fmt.Errorf("audio: signing a URL for recording %q in %s: %w", key, s.root, err)
	}
	return signed, nil
}

// byteCounter counts the bytes written to it.
type byteCounter int64

func (c *byteCounter) Write(p []byte) (int, error) {
	*c += byteCounter(len(p))
	return len(p), nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Delete removes the recording at key (the retention purge's last step).
// A missing one is ErrNotFound; a key outside the root is a *KeyError. For a
// directory root the file is removed through its key's confinement
// directory (see Key), so a link or "..", there or swapped in, cannot make
// it remove another tenant's file; a symbolic link inside the directory is
// removed itself, not what it names.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.checkKey(key, nil); err != nil {
		return err
	}
	if s.dir != "" {
		if err := s.removeFile(key); err != nil {
			var ke *KeyError
			if errors.As(err, &ke) || errors.Is(err, ErrNotFound) {
				return err
			}
			return fmt.Errorf("audio: deleting recording %q from %s: %w", key, s.root, err)
		}
		return nil
	}
	if err := s.bucket.Delete(ctx, key); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return fmt.Errorf("audio: recording %q in %s: %w", key, s.root, ErrNotFound)
		}
		return fmt.Errorf("audio: deleting recording %q from %s: %w", key, s.root, err)
	}
	return nil
}
