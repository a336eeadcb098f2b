package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/core"
)

// supervisor watches COMMAND and its lock: it passes signals on, and
// stops COMMAND when the lock is lost or at risk (docs/cli.md).
type supervisor struct {
	lock       *core.Lock
	ttl        time.Duration
	killAfter  time.Duration
	pgid       int // COMMAND's process group
	extensions *lastExtension
	stderr     io.Writer

	stopping bool             // SIGTERM sent for the lock
	kill     <-chan time.Time // when SIGKILL follows
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
	risk := time.NewTimer(sv.untilRisk())
	defer risk.Stop()
	lost := sv.lock.Done()
	for {
		select {
		case <-exited:
			return child.ProcessState, sv.stopping
		case sig := <-sigs:
			sv.signal(sig.(syscall.Signal))
		case <-risk.C:
			if d := sv.untilRisk(); d > 0 {
				risk.Reset(d)
				continue
			}
			sv.stop(fmt.Sprintf("lock %q at risk: its keep-alive has not reached a quorum (last try: %v), %v of validity left",
				sv.lock.Key(), sv.extensions.last(), sv.lock.Validity().Round(time.Millisecond)))
		case <-lost:
			lost = nil
			if sv.stopping { // already stopping: the validity is over, kill now
				sv.kill = fired()
				continue
			}
			sv.stop(sv.lock.Err().Error())
		case <-sv.kill:
			sv.kill = nil
			sv.signal(syscall.SIGKILL)
		}
	}
}

// untilRisk is how long until the lock is at risk: less than half its TTL
// of validity left, which a working keep-alive (every TTL/3) never lets
// happen.
func (sv *supervisor) untilRisk() time.Duration {
	return sv.lock.Validity() - sv.ttl/2
}

// stop sends SIGTERM to COMMAND's process group and arms SIGKILL: after
// --kill-after, or a tenth of the TTL before the validity ends, whichever
// is first.
func (sv *supervisor) stop(why string) {
	sv.stopping = true
	grace := min(sv.killAfter, sv.lock.Validity()-sv.ttl/10)
	grace = max(grace, 0)
	say(sv.stderr, "%s; stopping COMMAND: SIGTERM to its process group, SIGKILL in %v (exit status %d)",
		why, grace.Round(time.Millisecond), exitLost)
	sv.signal(syscall.SIGTERM)
	sv.kill = time.After(grace)
}

// signal sends sig to COMMAND's process group.
func (sv *supervisor) signal(sig syscall.Signal) {
	if err := syscall.Kill(-sv.pgid, sig); err != nil && err != syscall.ESRCH {
		say(sv.stderr, "sending %v to COMMAND: %v", sig, err)
	}
}

// fired is a timer channel that has fired.
func fired() <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Now()
	return c
}
