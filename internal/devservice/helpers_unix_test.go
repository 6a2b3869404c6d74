//go:build unix

package devservice

import (
	"errors"
	"io/fs"
	"os"
	"regexp"
	"syscall"
	"testing"
)

// requireProcessGone fails unless neither pid nor any member of its process
// group exists any more.
func requireProcessGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d: kill(pid, 0) = %v, want ESRCH", pid, err)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d: kill(-pgid, 0) = %v, want ESRCH", pid, err)
	}
}

// requireProcessRunning fails unless pid runs in a process group of its own.
func requireProcessRunning(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("process %d: kill(pid, 0) = %v, want running", pid, err)
	}
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatalf("getpgid(%d): %v", pid, err)
	}
	if pgid != pid {
		t.Errorf("process %d is in process group %d, want its own", pid, pgid)
	}
	if pgid == syscall.Getpgrp() {
		t.Errorf("process %d shares our process group %d", pid, pgid)
	}
}

func requireDirGone(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("os.Stat(%s) = %v, want it gone", dir, err)
	}
}

func requireDirExists(t *testing.T, dir string) {
	t.Helper()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("os.Stat(%s) = %v, %v; want a directory", dir, fi, err)
	}
}

var serviceDirPattern = regexp.MustCompile(`/[^\s?&]*callscribe-(pg|redis)-[0-9]+`)

// serviceDirsIn returns the throwaway directories named in s.
func serviceDirsIn(s string) []string {
	return serviceDirPattern.FindAllString(s, -1)
}
