package audio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A Session answers every key as the Store does, from many goroutines at
// once, keeping each tenant's directory open once; after Close it still
// answers (opening and closing as the Store does).
func TestSessionAnswersAsTheStore(t *testing.T) {
	t.Parallel()
	b, keys := sessionFixture(t)

	type answer struct {
		key, info, err string
	}
	ask := func(key func(string) (string, error), inspect func(string) (Info, error), p string) answer {
		k, err := key(p)
		if err != nil {
			return answer{err: "key: " + err.Error()}
		}
		info, err := inspect(k)
		if err != nil {
			return answer{key: k, err: "inspect: " + err.Error()}
		}
		return answer{key: k, info: fmt.Sprintf("%+v", info)}
	}
	want := make([]answer, len(keys))
	for i, p := range keys {
		want[i] = ask(b.store.Key, func(k string) (Info, error) { return b.store.Inspect(b.ctx, k) }, p)
	}

	session := b.store.Session()
	got := make([]answer, len(keys))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(keys); i += 8 {
				got[i] = ask(session.Key, func(k string) (Info, error) { return session.Inspect(b.ctx, k) }, keys[i])
			}
		})
	}
	wg.Wait()
	for i := range keys {
		if got[i] != want[i] {
			t.Errorf("%s: the session answered %+v, the store %+v", keys[i], got[i], want[i])
		}
	}
	if n := len(session.c.m); n != 4+16 {
		t.Errorf("the session keeps %d directories open, want the 4 tenants' and their 16 directories of recordings once each", n)
	}
	if err := session.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	for i, p := range keys {
		if a := ask(session.Key, func(k string) (Info, error) { return session.Inspect(b.ctx, k) }, p); a != want[i] {
			t.Errorf("%s after Close: the session answered %+v, the store %+v", p, a, want[i])
		}
	}
	if n := len(session.c.m); n != 0 {
		t.Errorf("a closed session keeps %d directories", n)
	}
}

// sessionFixture writes 40 recordings of 4 tenants beside files and links
// read or refused in their own ways, and returns the keys to ask for.
func sessionFixture(t *testing.T) (*bundle, []string) {
	t.Helper()
	b := setup(t, Config{MaxBytes: 2048})
	var keys []string
	for i := range 40 {
		tenant := fmt.Sprintf("t%d", i%4)
		key := fmt.Sprintf("%s/%03d/call-%d.wav", tenant, i/10, i)
		b.write(t, key, wav(pcm(8000, 1, 16).chunk(), data(16*(i+1))))
		keys = append(keys, key)
	}
	b.write(t, "t0/big.wav", wav(pcm(8000, 1, 16).chunk(), data(4096)))
	b.write(t, "t1/notes.wav", []byte("not a wav file at all"))
	if err := os.MkdirAll(filepath.Join(b.dir, "t2", "dir.wav"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "../t0/000/call-0.wav", filepath.Join(b.dir, "t3", "theirs.wav"))
	// A link to another directory of its tenant's: the session reaches
	// files through their own directory, yet answers as the walk does.
	mustSymlink(t, "../000/call-4.wav", filepath.Join(b.dir, "t0", "001", "sibling.wav"))
	keys = append(keys, "t0/big.wav", "t1/notes.wav", "t2/dir.wav", "t3/theirs.wav", "t0/001/sibling.wav",
		"t0/missing.wav", "nobody/call.wav", "t0/../t1/notes.wav", "top.wav")
	return b, keys
}

// Name then Inspect, as an ingest asks, answers what Key then Inspect
// answers: the same key and Info, or the same refusal (the same kind,
// reason and detail; Inspect names the key where Key named the path
// typed). The paths typed include links that lead outside their tenant's
// directory or the root, nowhere, in a loop, and ".." and absolute paths.
func TestSessionNameThenInspectRefusesAsKey(t *testing.T) {
	t.Parallel()
	b, keys := sessionFixture(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.wav"), wav(pcm(8000, 1, 16).chunk(), data(16)), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"outside.wav":  filepath.Join(outside, "secret.wav"),
		"dangling.wav": "/nonexistent/call.wav",
		"nowhere.wav":  "gone.wav",
		"loop.wav":     "loop.wav",
		"rdir":         "../t1",
		"odir":         outside,
		"updir":        filepath.Join("..", ".."),
	} {
		mustSymlink(t, target, filepath.Join(b.dir, "t0", link))
	}
	keys = append(keys, "t0/outside.wav", "t0/dangling.wav", "t0/nowhere.wav", "t0/loop.wav", "t0/rdir/notes.wav",
		"t0/odir/secret.wav", "t0/updir/etc/passwd", "../t0/000/call-0.wav", "./t0/000/call-0.wav",
		filepath.Join(b.dir, "t0/000/call-0.wav"), "/etc/passwd", "file://"+filepath.Join(b.dir, "t1/notes.wav"), "t0/\x01.wav", "")

	// kind is an answer without the path it names: the key and Info, or
	// the refusal's kind, reason and detail.
	kind := func(k string, info Info, err error) string {
		var ke *KeyError
		var tl *TooLargeError
		var fe *FormatError
		switch {
		case err == nil:
			return fmt.Sprintf("%s %+v", k, info)
		case errors.As(err, &ke):
			return fmt.Sprintf("KeyError %v %s", ke.Reason, ke.Detail)
		case errors.Is(err, ErrNotFound):
			return "not found"
		case errors.As(err, &tl):
			return fmt.Sprintf("too large %d", tl.Limit)
		case errors.As(err, &fe):
			return "format: " + fe.Error()
		}
		return "other: " + err.Error()
	}
	session := b.store.Session()
	defer func() { _ = session.Close() }()
	refused := 0
	for _, p := range keys {
		k, err := b.store.Key(p)
		var info Info
		if err == nil {
			info, err = b.store.Inspect(b.ctx, k)
		}
		want := kind(k, info, err)
		k, err = session.Name(p)
		info = Info{}
		if err == nil {
			info, err = session.Inspect(b.ctx, k)
		}
		if got := kind(k, info, err); got != want {
			t.Errorf("%q: Name then Inspect answered %s, Key then Inspect %s", p, got, want)
		}
		if err != nil {
			refused++
		}
	}
	if refused < 15 {
		t.Errorf("%d of %d paths refused: the fixture lost its refusals", refused, len(keys))
	}
}
