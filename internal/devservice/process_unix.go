//go:build unix

package devservice

import (
	"os"
	"os/exec"
	"syscall"
)

// signalProcess sends sig to the process alone (not its group): PostgreSQL's
// postmaster must be the one to decide how its backends stop.
func signalProcess(p *os.Process, sig syscall.Signal) error {
	return p.Signal(sig)
}

// killProcessGroup SIGKILLs every process in the group led by pid. It is
// best-effort: ESRCH (nothing left) is the usual, good outcome.
func killProcessGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// setGroupCancel makes a command made by exec.CommandContext kill its whole
// process group (it was started with Setpgid), not only its leader: initdb
// starts postgres processes of its own.
func setGroupCancel(cmd *exec.Cmd) {
	cmd.Cancel = func() error {
		killProcessGroup(cmd.Process.Pid)
		return cmd.Process.Kill()
	}
}
