package audio

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// openFile is Store.open for a directory root. The file is stat'ed and
// opened through its key's confinement directory (see within), so no link
// or "..", there or swapped in after checkKey, leads outside it. Only
// regular files are recordings: a directory, named pipe (FIFO), socket or
// device is refused
// with a *KeyError (KeyNotRegular) before it is read. The path is checked
// with stat before it is opened, so a device is never opened; it is then
// opened with O_NONBLOCK, so that a FIFO put there after the check cannot
// block the open, and the opened file is checked again.
//
// A Session's reads (ctx carries its cache) open each confinement directory
// once.
func (s *Store) openFile(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	r, rest, release, err := s.within(key, cacheOf(ctx))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, 0, err
		}
		return nil, 0, s.keyRefusal(key, err)
	}
	defer release() // the open file outlives the directory's *os.Root
	type opened struct {
		f    *os.File
		size int64
	}
	o, err := at(cacheOf(ctx), key, r, rest, func(r *os.Root, rest string) (opened, error) {
		fi, err := r.Stat(rest)
		if err != nil {
			return opened{}, s.statRefusal(r, key, rest, err)
		}
		if err := s.checkRegular(key, fi.Mode()); err != nil {
			return opened{}, err
		}
		f, err := r.OpenFile(rest, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return opened{}, s.confineError(key, err)
		}
		fi, err = f.Stat()
		if err == nil {
			err = s.checkRegular(key, fi.Mode())
		}
		if err != nil {
			_ = f.Close()
			return opened{}, err
		}
		return opened{f, fi.Size()}, nil
	})
	if err != nil {
		return nil, 0, err
	}
	return o.f, o.size, nil
}

// checkRegular refuses a mode that is not a regular file's.
func (s *Store) checkRegular(key string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	}
	return &KeyError{Path: key, Root: s.root, Reason: KeyNotRegular, Detail: kind + ", not a regular file"}
}
