package audio

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
)

// MaxBytesDefault is the Config.MaxBytes used when it is 0: 100 MiB, about
// 55 minutes of 16 kHz 16-bit mono or 3.6 hours of 8 kHz µ-law.
const MaxBytesDefault int64 = 100 << 20

// Config says where recordings are and how large one may be. The yaml keys
// are those of callscribe's configuration file (its audio section).
type Config struct {
	// URL is the recordings root, opened with gocloud.dev/blob:
	//
	//	file:///var/recordings             a local directory (must exist)
	//	/var/recordings, ./recordings      the same: a path without a scheme
	//	                                   means file:// + its absolute path
	//	s3://bucket?region=us-east-1       Amazon S3 (and S3-compatible)
	//	gs://bucket                        Google Cloud Storage
	//	azblob://container                 Azure Blob Storage
	//
	// Query parameters are the driver's own (see gocloud.dev/blob/s3blob,
	// gcsblob, azureblob, fileblob); "prefix" narrows a cloud bucket to the
	// keys under it, and is refused for a directory root (put it in the
	// path). Credentials come from the environment, never from the URL: user
	// information is refused. Required: there is no default root
	// (callscribe's audio.root defaults to its working directory).
	URL string `yaml:"root"`

	// MaxBytes is the largest recording accepted, in bytes. A larger one is
	// refused with a *TooLargeError, and reading stops at the limit: at most
	// MaxBytes+1 bytes of any object are read. Default MaxBytesDefault
	// (100 MiB) when 0; negative is an error.
	MaxBytes int64 `yaml:"max_bytes"`
}

// WithDefaults returns a copy of c with each zero field that has a default
// set to it.
func (c Config) WithDefaults() Config {
	c.MaxBytes = cmp.Or(c.MaxBytes, MaxBytesDefault)
	return c
}

// root is a parsed Config.URL.
type root struct {
	open    string // the URL handed to blob.OpenBucket
	display string // scheme://host/path, no user information or query: safe to log
	dir     string // absolute directory for a file root; "" for a cloud bucket
}

// validate checks c (after WithDefaults) and parses its URL.
func (c Config) validate() (root, error) {
	if c.MaxBytes < 0 {
		return root{}, fmt.Errorf("audio: Config.MaxBytes is %d: must not be negative (0 means %d)", c.MaxBytes, MaxBytesDefault)
	}
	rt, err := parseRoot(c.URL)
	if err != nil {
		return root{}, fmt.Errorf("audio: Config.URL: %w", err)
	}
	return rt, nil
}

// parseRoot turns a Config.URL into the URL to open and the safe form to
// show. Its errors never repeat the query or user information.
func parseRoot(raw string) (root, error) {
	if strings.TrimSpace(raw) == "" {
		return root{}, errors.New("required: the recordings root, e.g. file:///var/recordings or s3://bucket?region=us-east-1")
	}
	if !strings.Contains(raw, "://") {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return root{}, fmt.Errorf("directory %q: %w", raw, err)
		}
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
		return root{open: u.String(), display: u.String(), dir: abs}, nil
	}

	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the input, which may hold a secret: say less.
		return root{}, errors.New("not a valid URL")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	safe := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	display := safe.String()
	if u.User != nil {
		return root{}, fmt.Errorf("%s: credentials do not belong in the URL; the %s driver reads them from the environment", display, u.Scheme)
	}
	if u.Fragment != "" {
		return root{}, fmt.Errorf("%s: a fragment (#...) means nothing here", display)
	}
	q := u.Query()
	if q.Has("key") {
		return root{}, fmt.Errorf("%s: the \"key\" parameter opens a single object, not a recordings root", display)
	}
	if !blob.DefaultURLMux().ValidBucketScheme(u.Scheme) {
		return root{}, fmt.Errorf("%s: scheme %q is not one of file, s3, gs, azblob", display, u.Scheme)
	}

	if u.Scheme != "file" {
		if u.Host == "" {
			return root{}, fmt.Errorf("%s: no bucket or container name", display)
		}
		if u.Path != "" && u.Path != "/" {
			return root{}, fmt.Errorf("%s: a path after the bucket name is ignored by the driver; use ?prefix=%s/ instead",
				display, strings.Trim(u.Path, "/"))
		}
		safe.Path = ""
		return root{open: u.String(), display: safe.String()}, nil
	}

	if q.Has("prefix") {
		return root{}, fmt.Errorf("%s: put the directory in the path instead of the \"prefix\" parameter", display)
	}
	var dir string
	switch u.Host {
	case "", "localhost":
		dir = filepath.FromSlash(u.Path)
	case ".":
		dir = filepath.FromSlash(strings.TrimPrefix(u.Path, "/")) // file://./rel is relative
	default:
		return root{}, fmt.Errorf("%s: host %q: a file URL names a local directory (file:///abs/path)", display, u.Host)
	}
	if dir == "" {
		return root{}, fmt.Errorf("%s: no directory", display)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return root{}, fmt.Errorf("%s: %w", display, err)
	}
	open := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: u.RawQuery}
	shown := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	return root{open: open.String(), display: shown.String(), dir: abs}, nil
}
