package audio

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A tenant's keys are confined to the tenant's own directory, by file and
// not by string: a symbolic link (to a file or to a directory) in a/ that
// leads into b/ is refused by every method, even though b/ is inside the
// recordings root, and b's file survives a Delete through a's paths. A link
// that stays inside a/ still works.
func TestAttackSymlinkLeavesTenantDirectory(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	secret := wav(pcm(8000, 1, 16).chunk(), data(1600))
	mine := wav(pcm(16000, 1, 16).chunk(), data(3200))
	secretPath := b.write(t, "b/secret.wav", secret)
	b.write(t, "a/2026/mine.wav", mine)
	mustSymlink(t, "../b/secret.wav", filepath.Join(b.dir, "a", "link.wav"))
	mustSymlink(t, "../b", filepath.Join(b.dir, "a", "bdir"))
	mustSymlink(t, secretPath, filepath.Join(b.dir, "a", "abs.wav")) // absolute target
	mustSymlink(t, "2026/mine.wav", filepath.Join(b.dir, "a", "latest.wav"))
	mustSymlink(t, "2026", filepath.Join(b.dir, "a", "current"))
	mustSymlink(t, "b", filepath.Join(b.dir, "alias")) // a tenant directory that is a link to another

	escaping := []string{"a/link.wav", "a/bdir/secret.wav", "a/bdir/not-there.wav", "a/abs.wav", "alias/secret.wav"}
	session := b.store.Session() // a's directory opened once, for every key
	defer func() { _ = session.Close() }()
	for _, key := range escaping {
		check := func(what string, err error) {
			t.Helper()
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Reason != KeyOutsideRoot {
				t.Errorf("%s(%q) error = %v, want a KeyError with reason %s", what, key, err, KeyOutsideRoot)
				return
			}
			msg := err.Error()
			if !strings.Contains(msg, key) {
				t.Errorf("%s(%q): error %q does not name the key", what, key, msg)
			}
			if strings.Contains(ke.Detail, b.dir) || strings.Contains(msg, secretPath) || strings.Contains(msg, "lstat") {
				t.Errorf("%s(%q): error %q names a server path", what, key, msg)
			}
		}
		_, err := b.store.Key(key)
		check("Key", err)
		_, err = b.store.Inspect(b.ctx, key)
		check("Inspect", err)
		_, err = b.store.Open(b.ctx, key)
		check("Open", err)
		_, err = b.store.URL(b.ctx, key, time.Minute)
		check("URL", err)
		_, err = session.Key(key)
		check("Session.Key", err)
		_, err = session.Inspect(b.ctx, key)
		check("Session.Inspect", err)
		check("Delete", b.store.Delete(b.ctx, key))
		// The file driver itself, past the key check (a link swapped in
		// after the check), refuses too.
		if rc, _, err := b.open(b.ctx, key); err == nil {
			_ = rc.Close()
			t.Errorf("open(%q) read through the link", key)
		}
	}
	if got, err := os.ReadFile(secretPath); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("b's file after the attempts: %v", err)
	}
	// The links themselves are still there too: nothing was removed.
	for _, l := range []string{"a/link.wav", "a/bdir", "a/abs.wav", "alias"} {
		if _, err := os.Lstat(filepath.Join(b.dir, filepath.FromSlash(l))); err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}

	// Links that stay inside a/ still work.
	for _, key := range []string{"a/latest.wav", "a/current/mine.wav", "a/2026/mine.wav"} {
		info, err := b.store.Inspect(b.ctx, key)
		if err != nil || info.SHA256 != sha(mine) {
			t.Errorf("Inspect(%q) = %+v, %v; want a's own recording", key, info, err)
		}
		if _, err := b.store.URL(b.ctx, key, time.Minute); err != nil {
			t.Errorf("URL(%q) error = %v", key, err)
		}
	}
	// b's own key reads b's file.
	if info, err := b.store.Inspect(b.ctx, "b/secret.wav"); err != nil || info.SHA256 != sha(secret) {
		t.Errorf("Inspect(b/secret.wav) = %+v, %v", info, err)
	}
	// Deleting a link inside a/ removes the link, never what it names.
	if err := b.store.Delete(b.ctx, "a/latest.wav"); err != nil {
		t.Fatalf("Delete(a/latest.wav) error = %v", err)
	}
	if _, err := os.Stat(filepath.Join(b.dir, "a", "2026", "mine.wav")); err != nil {
		t.Errorf("a's recording after deleting the link to it: %v", err)
	}
}
