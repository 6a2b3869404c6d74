package audio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// openFile is Store.open for a directory root. Only regular files are
// recordings: a directory, named pipe (FIFO), socket or device is refused
// with a *KeyError (KeyNotRegular) before it is read. The path is checked
// with stat before it is opened, so a device is never opened; it is then
// opened with O_NONBLOCK, so that a FIFO put there after the check cannot
// block the open, and the opened file is checked again.
func (s *Store) openFile(_ context.Context, key string) (io.ReadCloser, int64, error) {
	p := filepath.Join(s.dir, filepath.FromSlash(key))
	fi, err := os.Stat(p)
	if err != nil {
		return nil, 0, s.statError(key, err)
	}
	if err := s.checkRegular(key, fi.Mode()); err != nil {
		return nil, 0, err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, s.statError(key, err)
	}
	fi, err = f.Stat()
	if err == nil {
		err = s.checkRegular(key, fi.Mode())
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// statError translates an error from stat or open of a directory root's file.
func (s *Store) statError(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("audio: recording %q in %s: %w", key, s.root, ErrNotFound)
	}
	return err
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
