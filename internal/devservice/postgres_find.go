package devservice

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNotFound is wrapped by the errors of FindPostgresBinDir and
// FindRedisServer when no usable binary exists.
var ErrNotFound = errors.New("not found")

// postgresBinGlobs are the versioned install locations searched after
// pg_config and PATH, each newest version first: Debian/Ubuntu, RHEL/Fedora
// (PGDG), and Homebrew's keg-only formulae on Apple silicon and Intel.
var postgresBinGlobs = []string{
	"/usr/lib/postgresql/*/bin",
	"/usr/pgsql-*/bin",
	"/opt/homebrew/opt/postgresql@*/bin",
	"/usr/local/opt/postgresql@*/bin",
}

// pgSearch is where FindPostgresBinDir looks; a struct so tests can point it
// at fake trees.
type pgSearch struct {
	pgConfig string   // path of pg_config; "" when it is not on PATH
	pathEnv  string   // value of $PATH
	globs    []string // like postgresBinGlobs, exactly one '*' each
}

// FindPostgresBinDir returns a directory holding both the initdb and the
// postgres executables. It tries, in order: the directory `pg_config --bindir`
// prints; each directory on PATH holding initdb, with symlinks resolved so
// that postgres is looked for next to the real initdb; then the usual install
// locations (/usr/lib/postgresql/*/bin and others), newest version first.
// When nothing qualifies, the error wraps ErrNotFound and lists every place
// looked at.
func FindPostgresBinDir() (string, error) {
	pgConfig, _ := exec.LookPath("pg_config")
	return pgSearch{pgConfig: pgConfig, pathEnv: os.Getenv("PATH"), globs: postgresBinGlobs}.find()
}

func (s pgSearch) find() (string, error) {
	var looked []string
	seen := map[string]bool{}
	// try reports whether dir qualifies, recording it as looked at otherwise.
	try := func(label, dir string) bool {
		dir = filepath.Clean(dir)
		if seen[dir] {
			return false
		}
		seen[dir] = true
		missing := missingExecutables(dir, "initdb", "postgres")
		if len(missing) == 0 {
			return true
		}
		looked = append(looked, fmt.Sprintf("%s%s (no %s)", label, dir, strings.Join(missing, ", no ")))
		return false
	}

	if s.pgConfig == "" {
		looked = append(looked, "pg_config --bindir (pg_config not on PATH)")
	} else if dir, err := pgConfigBinDir(s.pgConfig); err != nil {
		looked = append(looked, fmt.Sprintf("%s --bindir (%v)", s.pgConfig, err))
	} else if try(s.pgConfig+" --bindir: ", dir) {
		return filepath.Clean(dir), nil
	}

	var pathWithoutInitdb []string
	for _, dir := range filepath.SplitList(s.pathEnv) {
		if dir == "" {
			continue
		}
		initdb := filepath.Join(dir, "initdb")
		if !isExecutable(initdb) {
			pathWithoutInitdb = append(pathWithoutInitdb, dir)
			continue
		}
		real, err := filepath.EvalSymlinks(initdb)
		if err != nil {
			looked = append(looked, fmt.Sprintf("PATH: %s (resolving initdb: %v)", dir, err))
			continue
		}
		if try("PATH: ", filepath.Dir(real)) {
			return filepath.Clean(filepath.Dir(real)), nil
		}
	}
	if len(pathWithoutInitdb) > 0 {
		looked = append(looked, fmt.Sprintf("PATH: %s (no initdb)", strings.Join(pathWithoutInitdb, ", ")))
	}

	for _, pattern := range s.globs {
		matches := globNewestFirst(pattern)
		if len(matches) == 0 {
			looked = append(looked, pattern+" (no match)")
			continue
		}
		for _, dir := range matches {
			if try("", dir) {
				return filepath.Clean(dir), nil
			}
		}
	}

	return "", fmt.Errorf("PostgreSQL server binaries (initdb and postgres) %w; looked in: %s",
		ErrNotFound, strings.Join(looked, "; "))
}

// pgConfigBinDir runs `pg_config --bindir`.
func pgConfigBinDir(pgConfig string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, pgConfig, "--bindir").Output()
	if err != nil {
		return "", fmt.Errorf("running: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("printed nothing")
	}
	return dir, nil
}

// missingExecutables returns those of names that are not executable files in dir.
func missingExecutables(dir string, names ...string) []string {
	var missing []string
	for _, name := range names {
		if !isExecutable(filepath.Join(dir, name)) {
			missing = append(missing, name)
		}
	}
	return missing
}

// isExecutable reports whether path, symlinks followed, is a regular file with
// an execute bit set.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// globNewestFirst expands a pattern with a single '*' and orders the matches
// by the version the '*' stands for, newest first: 15 before 9.6, 9.6 before
// 9.5, numeric versions before anything else.
func globNewestFirst(pattern string) []string {
	matches, _ := filepath.Glob(pattern)
	prefix, suffix, _ := strings.Cut(pattern, "*")
	version := func(m string) []int {
		v := strings.TrimSuffix(strings.TrimPrefix(m, prefix), suffix)
		var parts []int
		for _, p := range strings.Split(v, ".") {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil
			}
			parts = append(parts, n)
		}
		return parts
	}
	slices.SortStableFunc(matches, func(a, b string) int {
		va, vb := version(a), version(b)
		switch {
		case va == nil && vb == nil:
			return strings.Compare(a, b)
		case va == nil:
			return 1
		case vb == nil:
			return -1
		}
		return -slices.Compare(va, vb)
	})
	return matches
}
