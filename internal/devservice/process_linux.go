package devservice

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts the child in its own process group, so that a Ctrl-C in
// the terminal reaches only us and we decide how the child stops, and asks the
// kernel to SIGKILL it should we die first. Pdeathsig fires when the OS thread
// that started the child exits; the Go runtime only retires threads locked by
// a goroutine that exits still locked, which this package never does. Go sets
// Pdeathsig after switching credentials, so it survives the switch to as.
func setProcAttrs(cmd *exec.Cmd, as *runAs) {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if as != nil {
		attr.Credential = &syscall.Credential{Uid: as.uid, Gid: as.gid}
	}
	cmd.SysProcAttr = attr
}
