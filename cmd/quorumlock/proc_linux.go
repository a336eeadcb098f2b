package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// adoptOrphans makes quorumlock a child subreaper: a process of COMMAND's
// whose parent exits becomes quorumlock's child, not init's, so that
// quorumlock reaps it (awaitGroup) and no container's init that never
// reaps can keep a dead member in COMMAND's process group, lock held.
func adoptOrphans() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot become a child subreaper: %w", err)
	}
	return nil
}

// sysProcAttr puts COMMAND in its own process group, so that a signal
// reaches everything it started, and has the kernel kill it if quorumlock
// dies first: without quorumlock, nothing keeps its lock alive. When
// quorumlock runs in the foreground of a terminal, COMMAND's group takes
// the terminal, as a shell's job would: a COMMAND in a background group
// that reads the terminal would be stopped (SIGTTIN) for ever, lock held.
func sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if fd, ok := foregroundTerminal(); ok {
		attr.Foreground, attr.Ctty = true, fd
	}
	return attr
}

// foregroundTerminal returns stdin's descriptor if it is a terminal whose
// foreground process group is quorumlock's.
func foregroundTerminal() (int, bool) {
	fd := int(os.Stdin.Fd())
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
	return fd, errno == 0 && int(pgrp) == syscall.Getpgrp()
}

// takeTerminalBack makes quorumlock's group the foreground of the terminal
// that attr gave COMMAND, once COMMAND has exited.
func takeTerminalBack(attr *syscall.SysProcAttr) {
	if !attr.Foreground {
		return
	}
	// A background group that sets the foreground gets SIGTTOU.
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(attr.Ctty), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&pgrp)))
}
