package audio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// For a directory root, a key's first element is the directory it is
// confined to (a tenant's part of the root, "<tenant>/..."); a key of one
// element is confined to the root itself. Every stat, open and remove of a
// recording goes through an *os.Root opened on that directory, so a path
// that leaves it is refused by the file system walk itself, symbolic links
// included, and not by comparing strings: a link in "northline/" to
// "../harbor/call-2002.wav", or a directory link "northline/hdir ->
// ../harbor", cannot reach harbor's recordings even though harbor is inside
// the recordings root. A link whose target is absolute is refused wherever it
// points (os.Root does not follow absolute targets), and the confinement
// directory itself must be a real directory, not a link to another one.
// Links that stay inside the confinement directory are followed.

// confinement splits key into the directory it is confined to ("" for the
// root itself) and the rest of the key below it.
func confinement(key string) (dir, rest string) {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// scopeOf names key's confinement directory for people: `"northline/"`, or
// "the recordings root".
func scopeOf(key string) string {
	if dir, _ := confinement(key); dir != "" {
		return fmt.Sprintf("%q", dir+"/")
	}
	return "the recordings root"
}

// within opens the directory key is confined to and returns it with the
// rest of the key, to use with it; release closes it. A missing directory is
// an error matching fs.ErrNotExist; a directory that is a symbolic link, or
// a path that escapes, is a *KeyError.
//
// With a cache (a Session's), the directory is opened and checked once and
// kept open until the cache is closed, and release does nothing.
func (s *Store) within(key string, c *rootCache) (r *os.Root, rest string, release func(), err error) {
	dir, rest := confinement(key)
	if dir == "" {
		return s.fsRoot, rest, func() {}, nil
	}
	if r := c.get(dir); r != nil {
		return r, rest, func() {}, nil
	}
	tr, err := s.fsRoot.OpenRoot(dir)
	if err != nil {
		return nil, "", nil, s.confineError(key, err)
	}
	// The directory opened must be the one named, not a link to another
	// (OpenRoot follows a link that stays inside the root). Lstat after the
	// open, and compare, so that a swap in between is caught too.
	lfi, lerr := s.fsRoot.Lstat(dir)
	ofi, oerr := tr.Stat(".")
	switch {
	case lerr != nil || oerr != nil:
		_ = tr.Close()
		return nil, "", nil, s.confineError(key, errors.Join(lerr, oerr))
	case lfi.Mode()&fs.ModeSymlink != 0 || !os.SameFile(lfi, ofi):
		_ = tr.Close()
		return nil, "", nil, &KeyError{Path: key, Root: s.root, Reason: KeyOutsideRoot,
			Detail: fmt.Sprintf("%s is a symbolic link, not a directory of its own", scopeOf(key))}
	}
	if c != nil {
		if r, kept := c.put(dir, tr); kept {
			return r, rest, func() {}, nil
		}
	}
	return tr, rest, func() { _ = tr.Close() }, nil
}

// below is the directory rest (a key's part under its confinement
// directory, open as r: within's answer) is in, opened once under r and
// kept in c (the "003/" of "northline/003/call.wav"), with the file's name
// in it; ok is false without a cache, for a file right under r, and for a
// directory that cannot be opened. A Session then reaches each file of a
// directory with one system call instead of a walk of its path. A try
// that fails there is made again from r (at): a link in that directory
// may lead to another directory of the confinement directory, which the
// walk from r follows and the directory's own *os.Root would refuse, and
// every refusal must be the walk's.
func (c *rootCache) below(key string, r *os.Root, rest string) (sr *os.Root, name string, ok bool) {
	i := strings.LastIndexByte(rest, '/')
	if c == nil || i < 0 {
		return nil, "", false
	}
	dir, _ := confinement(key)
	sub := dir + "/" + rest[:i]
	if sr := c.get(sub); sr != nil {
		return sr, rest[i+1:], true
	}
	sr, err := r.OpenRoot(rest[:i])
	if err != nil {
		return nil, "", false
	}
	kept, ok := c.put(sub, sr)
	if !ok {
		_ = sr.Close() // the cache is closed
		return nil, "", false
	}
	return kept, rest[i+1:], true
}

// at runs op on rest under r, first in rest's own directory kept in c
// (below) when it can, and again from r when that fails: its result, or
// the walk's.
func at[T any](c *rootCache, key string, r *os.Root, rest string, op func(r *os.Root, rest string) (T, error)) (T, error) {
	if sr, name, ok := c.below(key, r, rest); ok {
		if v, err := op(sr, name); err == nil {
			return v, nil
		}
	}
	return op(r, rest)
}

// escapes reports whether err is os.Root's refusal of a path that leaves it
// (through "..", an absolute symbolic link, or a link whose target is
// outside). The os package does not export that error, so it is matched by
// its text, on the innermost error only.
func escapes(err error) bool {
	for err != nil {
		if err.Error() == "path escapes from parent" {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}

// confineError translates an error from a file operation under an *os.Root
// for key: an escape is a *KeyError (KeyOutsideRoot) naming the key, not the
// server's path; a missing file is ErrNotFound; too many links a *KeyError
// (KeyInvalid); anything else is returned with the key relative to the
// root (an *os.Root's errors name paths relative to it).
func (s *Store) confineError(key string, err error) error {
	var ke *KeyError
	switch {
	case errors.As(err, &ke):
		return ke
	case escapes(err):
		return &KeyError{Path: key, Root: s.root, Reason: KeyOutsideRoot,
			Detail: fmt.Sprintf("leads outside %s (through a link or \"..\")", scopeOf(key))}
	case errors.Is(err, syscall.ELOOP):
		return &KeyError{Path: key, Root: s.root, Reason: KeyInvalid, Detail: "too many symbolic links"}
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("audio: recording %q in %s: %w", key, s.root, ErrNotFound)
	}
	return err
}

// checkConfined holds key to its confinement directory (see within): the
// part of it that exists must not lead outside through a symbolic link, and
// a link at its end must lead somewhere. A key that does not exist yet,
// wholly or in part, passes: nothing of it can lead elsewhere.
func (s *Store) checkConfined(key string, c *rootCache) error {
	if err := s.statConfined(key, c); !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil // no such file or directory yet
}

// statRefusal is the error of r.Stat(rest) for key, as checkConfined
// refuses it: ErrNotFound for a key that does not exist, a *KeyError for a
// link at its end that leads nowhere, for a path that leads outside, and
// for one that cannot be resolved.
func (s *Store) statRefusal(r *os.Root, key, rest string, err error) error {
	err = s.confineError(key, err)
	if errors.Is(err, ErrNotFound) {
		if fi, lerr := r.Lstat(rest); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return &KeyError{Path: key, Root: s.root, Reason: KeyInvalid, Detail: "a symbolic link that leads nowhere"}
		}
		return err
	}
	return s.keyRefusal(key, err)
}

// keyRefusal is err as a *KeyError: itself when it is one, otherwise
// KeyInvalid with the system's reason (without a path).
func (s *Store) keyRefusal(key string, err error) error {
	var ke *KeyError
	if errors.As(err, &ke) {
		return ke
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &KeyError{Path: key, Root: s.root, Reason: KeyInvalid, Detail: "cannot be resolved: " + err.Error()}
}

// statConfined is checkConfined for a key that must exist: one walk of
// key through its confinement directory (with c's directories, when
// given), with checkConfined's refusals, and ErrNotFound when the file (or
// its directory) does not exist.
func (s *Store) statConfined(key string, c *rootCache) error {
	r, rest, release, err := s.within(key, c)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return err
		}
		return s.keyRefusal(key, err)
	}
	defer release()
	_, err = at(c, key, r, rest, func(r *os.Root, rest string) (struct{}, error) {
		if _, err := r.Stat(rest); err != nil {
			return struct{}{}, s.statRefusal(r, key, rest, err)
		}
		return struct{}{}, nil
	})
	return err
}

// removeFile removes the file at key for a directory root, through its
// confinement directory, and the ".attrs" file the file driver keeps beside
// an object it wrote. A symbolic link at the key is removed itself, never
// what it names; a directory, FIFO, socket or device is refused.
func (s *Store) removeFile(key string) error {
	r, rest, release, err := s.within(key, nil)
	if err != nil {
		return err
	}
	defer release()
	fi, err := r.Lstat(rest)
	if err != nil {
		return s.confineError(key, err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		if err := s.checkRegular(key, fi.Mode()); err != nil {
			return err
		}
	}
	if err := r.Remove(rest); err != nil {
		return s.confineError(key, err)
	}
	if err := r.Remove(rest + ".attrs"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s.confineError(key, err)
	}
	return nil
}
