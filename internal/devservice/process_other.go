//go:build !unix

package devservice

import (
	"os"
	"os/exec"
	"syscall"
)

// Outside unix there are no process groups, signals or credentials to set:
// children are killed outright. Throwaway servers are meant for Linux and
// macOS; this file only keeps the package building elsewhere.

func setProcAttrs(cmd *exec.Cmd, as *runAs) {}

func signalProcess(p *os.Process, sig syscall.Signal) error { return p.Kill() }

func killProcessGroup(pid int) {}

func setGroupCancel(cmd *exec.Cmd) {}
