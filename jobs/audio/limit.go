package audio

import "io"

// limitedReader reads a recording up to its size limit. It never asks the
// underlying reader for more than limit+1 bytes in all: the extra byte tells
// a recording of exactly limit bytes from a larger one, which fails with a
// *TooLargeError instead of being read on.
type limitedReader struct {
	rc    io.ReadCloser
	left  int64 // bytes that may still be returned
	key   string
	limit int64
	err   error // sticky: the *TooLargeError once the limit is passed
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.rc.Read(p)
	if int64(n) > l.left {
		n = int(l.left)
		l.left = 0
		l.err = &TooLargeError{Key: l.key, Limit: l.limit, Size: -1}
		return n, l.err
	}
	l.left -= int64(n)
	return n, err
}

func (l *limitedReader) Close() error { return l.rc.Close() }
