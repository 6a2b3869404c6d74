//go:build unix && !linux

package devservice

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts the child in its own process group, so that a Ctrl-C in
// the terminal reaches only us. There is no parent-death signal outside Linux:
// a child outlives us if we are killed without running Stop.
func setProcAttrs(cmd *exec.Cmd, as *runAs) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if as != nil {
		attr.Credential = &syscall.Credential{Uid: as.uid, Gid: as.gid}
	}
	cmd.SysProcAttr = attr
}
