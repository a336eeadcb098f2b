package main

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/core"
)

// supervisor watches COMMAND and its lock: it passes signals on, and
// stops COMMAND when the lock ends, lost or at risk (the library's rule:
// an extension failed and less than the at-risk margin of validity is
// left, core.ErrLockAtRisk; docs/cli.md).
type supervisor struct {
	lock      *core.Lock
	ttl       time.Duration
	killAfter time.Duration
	pgid      int // COMMAND's process group
	stderr    io.Writer
	then      string // what follows a lost lock, said when it is

	stopping  bool             // SIGTERM sent for the lock
	signalled bool             // a signal was passed on
	kill      <-chan time.Time // when SIGKILL follows
}

// watch waits for child to exit and then for the rest of its process
// group, and reports child's state and whether it was stopped for the
// lock.
func (sv *supervisor) watch(child *exec.Cmd, sigs <-chan os.Signal) (*os.ProcessState, bool) {
	exited := make(chan struct{})
	go func() {
		_ = child.Wait() // its error is in ProcessState
		awaitGroup(sv.pgid)
		close(exited)
	}()
	ended := sv.lock.Done()
	for {
		select {
		case <-exited:
			return child.ProcessState, sv.stopping
		case sig := <-sigs:
			sv.signalled = true
			sv.signal(sig.(syscall.Signal))
		case <-ended:
			ended = nil
			sv.stop(sv.lock.Err().Error())
		case <-sv.kill:
			sv.kill = nil
			sv.signal(syscall.SIGKILL)
		}
	}
}

// stop sends SIGTERM to COMMAND's process group and arms SIGKILL: after
// --kill-after, or a tenth of the TTL before the validity ends, whichever
// is first (a lock at risk is still valid: Validity is the time left).
func (sv *supervisor) stop(why string) {
	sv.stopping = true
	grace := min(sv.killAfter, sv.lock.Validity()-sv.ttl/10)
	grace = max(grace, 0)
	say(sv.stderr, "%s; stopping COMMAND: SIGTERM to its process group, SIGKILL in %v (%s)",
		why, grace.Round(time.Millisecond), sv.then)
	sv.signal(syscall.SIGTERM)
	sv.kill = time.After(grace)
}

// signal sends sig to COMMAND's process group.
func (sv *supervisor) signal(sig syscall.Signal) {
	if err := syscall.Kill(-sv.pgid, sig); err != nil && err != syscall.ESRCH {
		say(sv.stderr, "sending %v to COMMAND: %v", sig, err)
	}
}
