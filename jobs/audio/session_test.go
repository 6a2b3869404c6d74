package audio

import (
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
