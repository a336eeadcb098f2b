package main

import "syscall"

// sysProcAttr puts COMMAND in its own process group, so that a signal
// reaches everything it started, and has the kernel kill it if quorumlock
// dies first: without quorumlock, nothing keeps its lock alive.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
