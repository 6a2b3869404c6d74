//go:build unix

package devservice

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFindPostgresBinDir(t *testing.T) {
	t.Parallel()
	dir, err := FindPostgresBinDir()
	if err != nil {
		t.Fatalf("FindPostgresBinDir on this machine: %v", err)
	}
	t.Logf("found %s", dir)
	if missing := missingExecutables(dir, "initdb", "postgres"); len(missing) > 0 {
		t.Errorf("FindPostgresBinDir() = %s, which lacks %v", dir, missing)
	}
}

// fakeTree creates executables at the given paths (relative to a new temp
// dir) and returns the temp dir.
func fakeTree(t *testing.T, executables ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, rel := range executables {
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		writeScript(t, path, "exit 0")
	}
	return root
}

func TestPgSearch(t *testing.T) {
	t.Parallel()

	t.Run("pg_config wins", func(t *testing.T) {
		t.Parallel()
		root := fakeTree(t, "a/initdb", "a/postgres", "lib/16/bin/initdb", "lib/16/bin/postgres")
		pgConfig := filepath.Join(root, "pg_config")
		writeScript(t, pgConfig, "echo "+filepath.Join(root, "a"))
		got, err := pgSearch{pgConfig: pgConfig, globs: []string{filepath.Join(root, "lib/*/bin")}}.find()
		if err != nil || got != filepath.Join(root, "a") {
			t.Errorf("find() = %q, %v; want %s", got, err, filepath.Join(root, "a"))
		}
	})

	t.Run("pg_config pointing at a client-only dir is skipped", func(t *testing.T) {
		t.Parallel()
		root := fakeTree(t, "client/initdb", "lib/15/bin/initdb", "lib/15/bin/postgres")
		pgConfig := filepath.Join(root, "pg_config")
		writeScript(t, pgConfig, "echo "+filepath.Join(root, "client"))
		got, err := pgSearch{pgConfig: pgConfig, globs: []string{filepath.Join(root, "lib/*/bin")}}.find()
		if err != nil || got != filepath.Join(root, "lib/15/bin") {
			t.Errorf("find() = %q, %v; want lib/15/bin", got, err)
		}
	})

	t.Run("PATH symlink resolved to the real bin dir", func(t *testing.T) {
		t.Parallel()
		root := fakeTree(t, "real/bin/initdb", "real/bin/postgres")
		// Like /usr/local/bin on this machine: initdb symlinked, postgres not.
		if err := os.MkdirAll(filepath.Join(root, "links"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(root, "real/bin/initdb"), filepath.Join(root, "links/initdb")); err != nil {
			t.Fatal(err)
		}
		pathEnv := strings.Join([]string{filepath.Join(root, "empty"), filepath.Join(root, "links")}, string(os.PathListSeparator))
		got, err := pgSearch{pathEnv: pathEnv}.find()
		if err != nil || got != filepath.Join(root, "real/bin") {
			t.Errorf("find() = %q, %v; want real/bin", got, err)
		}
	})

	t.Run("newest version first, numerically", func(t *testing.T) {
		t.Parallel()
		root := fakeTree(t,
			"lib/9.6/bin/initdb", "lib/9.6/bin/postgres",
			"lib/10/bin/initdb", "lib/10/bin/postgres",
			"lib/17/bin/initdb", // incomplete: skipped
			"lib/beta/bin/initdb", "lib/beta/bin/postgres",
		)
		got, err := pgSearch{globs: []string{filepath.Join(root, "lib/*/bin")}}.find()
		if err != nil || got != filepath.Join(root, "lib/10/bin") {
			t.Errorf("find() = %q, %v; want lib/10/bin", got, err)
		}
	})

	t.Run("error lists every place looked", func(t *testing.T) {
		t.Parallel()
		root := fakeTree(t, "onlyinitdb/initdb")
		pathEnv := strings.Join([]string{filepath.Join(root, "nothing"), filepath.Join(root, "onlyinitdb")}, string(os.PathListSeparator))
		_, err := pgSearch{pathEnv: pathEnv, globs: []string{filepath.Join(root, "lib/*/bin")}}.find()
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("find() error = %v, want ErrNotFound", err)
		}
		for _, want := range []string{
			"pg_config not on PATH",
			filepath.Join(root, "onlyinitdb") + " (no postgres)",
			filepath.Join(root, "nothing") + " (no initdb)",
			filepath.Join(root, "lib/*/bin") + " (no match)",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	})
}

func TestGlobNewestFirst(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9.5", "16", "9.6", "10", "main", "15.2"} {
		if err := os.MkdirAll(filepath.Join(root, "pg", v, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, m := range globNewestFirst(filepath.Join(root, "pg/*/bin")) {
		got = append(got, filepath.Base(filepath.Dir(m)))
	}
	if want := []string{"16", "15.2", "10", "9.6", "9.5", "main"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}
