//go:build unix && !linux

package main

import "syscall"

// sysProcAttr puts COMMAND in its own process group, so that a signal
// reaches everything it started. (COMMAND does not take the terminal, as
// on Linux: docs/cli.md.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func takeTerminalBack(*syscall.SysProcAttr) {}

// adoptOrphans does nothing outside Linux: COMMAND's orphans go to init,
// which reaps them.
func adoptOrphans() error { return nil }
