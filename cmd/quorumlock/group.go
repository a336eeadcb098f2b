package main

import (
	"errors"
	"syscall"
	"time"
)

// groupPoll is how often run looks, once COMMAND has exited, whether a
// process of its group is left: the release waits that long at most
// after the last one ends.
const groupPoll = 50 * time.Millisecond

// awaitGroup returns once no process of the process group pgid is left,
// as flock(1) keeps its lock while a process holds its descriptor. A
// process that leaves the group (setsid, setpgid) is not waited for. It
// reaps the orphans quorumlock adopted meanwhile: a dead process is still
// a member until reaped. Call it only once COMMAND itself has been waited
// for, lest it take COMMAND's exit status from exec.Cmd.Wait.
func awaitGroup(pgid int) {
	for {
		reapOrphans()
		// ESRCH: no member left. EPERM (a member that changed its user)
		// and the rest: members are left.
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return
		}
		time.Sleep(groupPoll)
	}
}

// reapOrphans reaps every child of quorumlock that has exited: orphans of
// COMMAND it adopted (adoptOrphans), in COMMAND's group or not.
func reapOrphans() {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil || pid <= 0: // ECHILD: no child; 0: none exited
			return
		}
	}
}
