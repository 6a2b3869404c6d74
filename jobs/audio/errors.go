package audio

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned (wrapped, with the key) when a recording does not
// exist.
var ErrNotFound = errors.New("recording not found")

// ErrTooLarge matches every *TooLargeError with errors.Is.
var ErrTooLarge = errors.New("recording too large")

// TooLargeError is returned when a recording is larger than
// Config.MaxBytes.
type TooLargeError struct {
	// Key is the recording's bucket key.
	Key string
	// Limit is the Config.MaxBytes in force.
	Limit int64
	// Size is the object's stated size when it was refused before reading,
	// or -1 when it was cut off while being read (it is then at least
	// Limit+1).
	Size int64
}

// Error reports the key, the size when known, and the limit.
func (e *TooLargeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("recording %q is larger than the %d-byte limit", e.Key, e.Limit)
	}
	return fmt.Sprintf("recording %q is %d bytes, larger than the %d-byte limit", e.Key, e.Size, e.Limit)
}

// Is reports whether target is ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// KeyReason says why a path or key was refused. The values are stable
// strings, safe for a log attribute or a metric label.
type KeyReason string

const (
	// KeyOutsideRoot: the path leads outside the recordings root: "..", an
	// absolute path or a URL elsewhere, or, for a directory root, a
	// symbolic link that leads out of the key's tenant directory (its first
	// element), has an absolute target, or is the tenant directory itself.
	KeyOutsideRoot KeyReason = "outside-root"
	// KeyInvalid: the path cannot name a recording at all: empty, the root
	// itself, control characters, invalid UTF-8, a key that is not in
	// clean form, or a symbolic link that leads nowhere or into a loop.
	KeyInvalid KeyReason = "invalid"
	// KeyNotRegular: for a directory root, the path names a directory, a
	// named pipe (FIFO), a socket or a device, not a regular file.
	KeyNotRegular KeyReason = "not-regular"
)

// KeyError is returned by Store.Key, and by the Store methods that take a
// key, for a path that is refused.
type KeyError struct {
	// Path is the path or key as given.
	Path string
	// Root is the recordings root, as a URL without its query.
	Root string
	// Reason classifies the refusal.
	Reason KeyReason
	// Detail explains the refusal for people; it is not for branching.
	Detail string
}

// Error names the path, the root and why, e.g.
// recording path "../x.wav" is outside the recordings root file:///var/recordings: leads above the root.
func (e *KeyError) Error() string {
	what := "is outside the recordings root"
	if e.Reason != KeyOutsideRoot {
		what = "is not a valid recording path under"
	}
	if e.Detail == "" {
		return fmt.Sprintf("recording path %q %s %s", e.Path, what, e.Root)
	}
	return fmt.Sprintf("recording path %q %s %s: %s", e.Path, what, e.Root, e.Detail)
}
