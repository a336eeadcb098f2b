package core

import (
	"context"

	"github.com/quorumlock/quorumlock/core/driver"
)

// WithClock sets the clock of the Locker's validity and retry waits; a
// nil one keeps driver.SystemClock(). Only tests set it.
func WithClock(c driver.Clock) Option {
	if driver.IsNil(c) {
		return optionFunc{func(*options) {}, "WithClock(nil)"}
	}
	return optionFunc{func(o *options) { o.clock = c }, "WithClock(...)"}
}

// SetKeeperAddHook makes f run as the keeper starts adding a lock, until
// the returned function restores the previous hook.
func SetKeeperAddHook(f func()) (restore func()) {
	prev := testHookKeeperAdd
	testHookKeeperAdd = f
	return func() { testHookKeeperAdd = prev }
}

// DuplicateNodeError is the error of a node that is the same server as
// another node.
type DuplicateNodeError = duplicateNodeError

// RestartGuardError is the error of a node the restart guard keeps from
// voting.
type RestartGuardError = restartGuardError

// Settle waits until the Locker's background calls to suspect nodes and
// its probes have ended: every suspect node has answered again, or the
// Locker is closed.
func Settle(l *Locker) { l.health.probes.Wait() }

// Suspect reports whether node i of l is suspect, or a call to it runs in
// the background.
func Suspect(l *Locker, i int) bool {
	return l.suspect.is(i) || len(l.health.status[i].lane) > 0
}

// HoldKeeper takes l's keeper's mutex, so that a kept-alive lock's end
// waits in the keeper, until the returned function gives it back.
func HoldKeeper(l *Locker) (unlock func()) {
	l.keeper.mu.Lock()
	return l.keeper.mu.Unlock
}

// Ended reports whether lock has ended (its state is no longer held).
func Ended(lock *Lock) bool {
	lock.mu.Lock()
	defer lock.mu.Unlock()
	return lock.state != stateHeld
}

// LeaderRound runs a leader round of call on l (as a waiter woken by an
// empty notice makes one) and returns its results and the nodes a release
// after it would skip as never sent the call.
func LeaderRound(ctx context.Context, l *Locker, call func(ctx context.Context, i int) (bool, error)) ([]NodeResult, uint64) {
	results := l.leaderRound(ctx, call)
	return results, l.skippedNodes(results)
}

// HoldLane takes node i's lane, as a call to it in the background does,
// until the returned function gives it back.
func HoldLane(l *Locker, i int) (release func()) {
	if !l.health.status[i].tryLane() {
		panic("lane already held")
	}
	return func() { <-l.health.status[i].lane }
}
