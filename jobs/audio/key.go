package audio

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Key turns what a user typed into the bucket key of a recording under the
// root:
//
//   - a path relative to the root ("northline/call-1001.wav",
//     "./a/../b.wav"), for any root;
//   - for a directory root, also an absolute path under it
//     ("/var/recordings/northline/call-1001.wav") or its file:// URL,
//     whether through the root as configured or through its resolved
//     symbolic links.
//
// The key is the clean, slash-separated path relative to the root. Anything
// that leads outside the root is refused with a *KeyError naming the path and
// the root: "..", an absolute path or a URL elsewhere (or any absolute path
// or URL for a cloud root), and, for a directory root, a path whose symbolic
// links lead outside its confinement directory, the key's first element
// (the tenant's directory, "<tenant>/..."; the root for a one-element key),
// or whose link has an absolute target; the walk is os.Root's, and a path
// that does not exist yet is checked as far as it exists. Key does not
// check that the recording exists.
func (s *Store) Key(userPath string) (string, error) { return s.key(userPath, nil) }

// key is Key, walking with c (nil: without a cache).
func (s *Store) key(userPath string, c *rootCache) (string, error) {
	key, err := s.name(userPath)
	if err != nil || s.dir == "" {
		return key, err
	}
	if err := s.checkConfined(key, c); err != nil {
		return "", NamedAs(err, userPath)
	}
	return key, nil
}

// name is Key without the walk of the file system: the key userPath
// names, refused by the rules for its text only (checkKeyText).
func (s *Store) name(userPath string) (string, error) {
	refuse := func(reason KeyReason, format string, args ...any) (string, error) {
		return "", &KeyError{Path: userPath, Root: s.root, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	if userPath == "" {
		return refuse(KeyInvalid, "empty path")
	}
	if err := checkChars(userPath); err != "" {
		return refuse(KeyInvalid, "%s", err)
	}

	var key string
	switch {
	case strings.Contains(userPath, "://"):
		u, err := url.Parse(userPath)
		if err != nil {
			return refuse(KeyInvalid, "not a valid URL")
		}
		if !strings.EqualFold(u.Scheme, "file") || s.dir == "" {
			return refuse(KeyOutsideRoot, "a %s URL does not name a key under this root; give the path relative to the root", u.Scheme)
		}
		if u.Host != "" && u.Host != "localhost" {
			return refuse(KeyOutsideRoot, "file URL names host %q", u.Host)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return refuse(KeyInvalid, "a file URL with a query or fragment")
		}
		k, ok := s.relFromAbs(filepath.FromSlash(u.Path))
		if !ok {
			return refuse(KeyOutsideRoot, "%s is not under %s", u.Path, s.dir)
		}
		key = k
	case filepath.IsAbs(userPath) || strings.HasPrefix(userPath, "/"):
		if s.dir == "" {
			return refuse(KeyOutsideRoot, "an absolute path cannot name an object in a cloud bucket; give the path relative to the root")
		}
		k, ok := s.relFromAbs(userPath)
		if !ok {
			return refuse(KeyOutsideRoot, "%s is not under %s", filepath.Clean(userPath), s.dir)
		}
		key = k
	default:
		key = path.Clean(filepath.ToSlash(userPath))
	}

	if err := s.checkKeyText(key); err != nil {
		return "", NamedAs(err, userPath)
	}
	return key, nil
}

// NamedAs returns err, a *KeyError in it naming userPath, the path as the
// request typed it, rather than the key it was turned into.
func NamedAs(err error, userPath string) error {
	var ke *KeyError
	if errors.As(err, &ke) {
		ke.Path = userPath
	}
	return err
}

// relFromAbs returns p relative to the directory root, as a slash path, if
// p is lexically under the root as configured or as resolved.
func (s *Store) relFromAbs(p string) (string, bool) {
	p = filepath.Clean(p)
	for _, dir := range []string{s.dir, s.dirReal} {
		if rel, ok := under(dir, p); ok {
			return filepath.ToSlash(rel), true
		}
	}
	return "", false
}

// under returns p relative to dir, if p is dir or below it. Both are clean
// absolute paths.
func under(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// checkKey holds a bucket key to the rules Key's results follow: a clean,
// relative, slash-separated path that stays under the root and, for a
// directory root, inside its confinement directory (its first element; see
// checkConfined), also through symbolic links.
func (s *Store) checkKey(key string, c *rootCache) error {
	if err := s.checkKeyText(key); err != nil || s.dir == "" {
		return err
	}
	return s.checkConfined(key, c)
}

// checkKeyText is checkKey without the walk of the file system: the rules
// a key's text follows. A directory root's open (openFile) walks the key
// itself, through the same *os.Root and with the same refusals, so reading
// a recording walks its path once, not twice.
func (s *Store) checkKeyText(key string) error {
	refuse := func(reason KeyReason, format string, args ...any) error {
		return &KeyError{Path: key, Root: s.root, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case key == "" || key == ".":
		return refuse(KeyInvalid, "names the root itself, not a recording")
	case key == ".." || strings.HasPrefix(key, "../"):
		return refuse(KeyOutsideRoot, "leads above the root")
	case strings.HasPrefix(key, "/"):
		return refuse(KeyInvalid, "a key is relative to the root")
	case path.Clean(key) != key:
		return refuse(KeyInvalid, "not a clean key (it would be %q)", path.Clean(key))
	}
	if err := checkChars(key); err != "" {
		return refuse(KeyInvalid, "%s", err)
	}
	if s.dir == "" {
		return nil
	}

	// fileblob escapes "__0x..__" sequences in keys, so such a key would be
	// read from another file than the one checked here.
	if strings.Contains(key, "__0x") {
		return refuse(KeyInvalid, `contains "__0x", which the file driver escapes`)
	}
	return nil
}

// checkChars returns why p cannot be a key, or "": invalid UTF-8 and control
// characters are refused.
func checkChars(p string) string {
	if !utf8.ValidString(p) {
		return "not valid UTF-8"
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Sprintf("control character %U", r)
		}
	}
	return ""
}
