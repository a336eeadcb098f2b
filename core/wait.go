package core

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is how an acquisition waits between its rounds, apart from
// the rounds themselves (docs/design.md, Acquire's loop). A pollWaiter
// sleeps the retry delay; a handoffWaiter (handoff.go) also queues for
// the key and wakes at a release notice.

// waiter is how an acquisition waits between its rounds. The acquisition
// calls startRound and endRound around each round, and wait between two.
type waiter interface {
	// queueFirst reports whether the acquisition queues before its first
	// round (docs/design.md, yielding).
	queueFirst() bool
	// startRound returns what woke the coming round, and whether it is a
	// follow-up of the last one, which uses up no try.
	startRound() (woken wakeKind, followUp bool)
	// endRound takes the round's error (nil: it won) and whether its
	// clean-up handed the key to a queued waiter.
	endRound(qe *QuorumError, handed bool)
	// wait waits delay at most after the lost round last, less when a
	// notice comes or ctx ends. It reports round (make a round next, else
	// wait again first) and closed (the Locker is closing).
	wait(last *QuorumError, delay time.Duration) (round, closed bool)
	// leave ends the waiting, when the acquisition returns.
	leave()
}

// wakeKind says what started a round of Acquire.
type wakeKind uint8

const (
	wokenByNothing wakeKind = iota // the first round, a retry delay or a free lock
	wokenByNotice                  // an empty release notice, which may have woken others
	wokenByTicket                  // the waiter's own ticket: it alone was woken
	wokenBySplit                   // the call's last round split the votes (acquire.go)
)

// pollWaiter waits the retry delay between rounds: the waiter of a key
// without hand-off (WithWakeOnRelease off, a herald that cannot watch, or
// a key whose queue cannot share its cluster slot).
type pollWaiter struct {
	ctx     context.Context
	clock   driver.Clock
	closing <-chan struct{}
}

func (pollWaiter) queueFirst() bool             { return false }
func (pollWaiter) startRound() (wakeKind, bool) { return wokenByNothing, false }
func (pollWaiter) endRound(*QuorumError, bool)  {}
func (pollWaiter) leave()                       {}
func (p pollWaiter) wait(_ *QuorumError, delay time.Duration) (round, closed bool) {
	_, closed = sleep(p.ctx, p.clock, p.closing, delay, nil)
	return true, closed
}

// sleep waits delay, or until woken receives (a nil woken never does), ctx
// ends or closing is closed; it reports a wake and a close.
func sleep(ctx context.Context, clock driver.Clock, closing <-chan struct{}, delay time.Duration, woken <-chan struct{}) (wake, closed bool) {
	timer := clock.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C():
	case <-woken:
		return true, false
	case <-ctx.Done():
	case <-closing:
		return false, true
	}
	return false, false
}
