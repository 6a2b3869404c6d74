package audio

import (
	"context"
	"errors"
	"os"
	"sync"
)

// A Session reads many recordings of a directory root in a short span (an
// ingest's chunk): each confinement directory (a tenant's part of the root)
// is opened and checked once, as within checks it, and kept open until
// Close, instead of opened, checked and closed for every Key and every
// read. What a Session refuses and returns is what the Store's Key and
// Inspect refuse and return. An *os.Root follows its directory, not its
// name: a tenant's directory renamed or replaced while a Session is open is
// still read where it was opened, so keep a Session to one batch of work,
// not the life of a process. For a cloud bucket a Session is the Store.
//
// A Session is safe for concurrent use; Close it once its reads are done.
type Session struct {
	s *Store
	c *rootCache
}

// Session starts a Session on s.
func (s *Store) Session() *Session {
	return &Session{s: s, c: &rootCache{m: map[string]*os.Root{}}}
}

// Key is Store.Key through the session's open directories.
func (ss *Session) Key(userPath string) (string, error) { return ss.s.key(userPath, ss.c) }

// Name is Key without Key's walk of the file system: the key userPath
// names, refused only by the rules for its text. For a key that Inspect
// reads next, the walk would be made twice: Inspect walks the key itself
// with the same refusals (a link that leads outside, or nowhere, is a
// *KeyError; a missing file ErrNotFound), its *KeyError naming the key
// instead of userPath.
func (ss *Session) Name(userPath string) (string, error) { return ss.s.name(userPath) }

// Inspect is Store.Inspect through the session's open directories.
func (ss *Session) Inspect(ctx context.Context, key string) (Info, error) {
	return ss.s.Inspect(context.WithValue(ctx, rootCacheKey{}, ss.c), key)
}

// Close closes the directories the session opened. Reads after Close open
// and close their directories as the Store does.
func (ss *Session) Close() error { return ss.c.close() }

// rootCache holds confinement directories opened and checked by within,
// by name. A nil *rootCache holds nothing.
type rootCache struct {
	mu     sync.Mutex
	m      map[string]*os.Root
	closed bool
}

// rootCacheKey is the context key carrying a Session's cache to openFile.
type rootCacheKey struct{}

// cacheOf is the Session's cache ctx carries, or nil.
func cacheOf(ctx context.Context) *rootCache {
	c, _ := ctx.Value(rootCacheKey{}).(*rootCache)
	return c
}

// get is the open directory of dir, or nil.
func (c *rootCache) get(dir string) *os.Root {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[dir]
}

// put keeps r, opened and checked for dir, and returns the directory to use:
// r, or the one another reader kept first (r is closed then), and true. A
// closed cache keeps nothing: it returns r and false, and the caller closes r
// after its read.
func (c *rootCache) put(dir string, r *os.Root) (*os.Root, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return r, false
	}
	if kept, ok := c.m[dir]; ok {
		_ = r.Close()
		return kept, true
	}
	c.m[dir] = r
	return r, true
}

// close closes every directory kept.
func (c *rootCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for dir, r := range c.m {
		errs = append(errs, r.Close())
		delete(c.m, dir)
	}
	return errors.Join(errs...)
}
