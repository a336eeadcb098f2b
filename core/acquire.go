package core

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is Acquire's loop of rounds and waits; why it waits as it
// does: docs/design.md, Acquire's loop.

// Acquire takes the lock on key: it makes rounds until one wins a quorum
// with validity left, the tries run out (WithTries), ctx ends or the Locker
// is closed, waiting between rounds as the retry policy says.
//
// On failure it returns a *QuorumError from the last round, matching
// ErrNotAcquired (contention), ErrUnavailable (outage) or
// ErrValidityExpired or ErrNodeRestarted, and also context.Canceled or
// context.DeadlineExceeded when ctx ended. Bad input matches
// ErrInvalidArgument, and a closed Locker ErrClosed. After a failed round
// every node is released, even when ctx has ended. A last round that split
// the votes is settled first, as TryAcquire's is.
func (l *Locker) Acquire(ctx context.Context, key string) (*Lock, error) {
	if l.zero() {
		return nil, errZeroLocker
	}
	return l.acquire(ctx, key, l.o.tries)
}

// TryAcquire makes one round to take the lock on key, without waiting or
// retrying after contention. Its errors are those of Acquire.
//
// A round that won some nodes but no quorum may have split the votes with
// other contenders, so that none holds the lock: then TryAcquire makes up
// to three leader rounds at once (the nodes asked one by one in name order,
// going on only past a grant), so that one contender wins. A lock held by
// another owner refuses the first leader round at its first node (or, when
// it lacks that node, each leader round after it), and the error says so.
func (l *Locker) TryAcquire(ctx context.Context, key string) (*Lock, error) {
	if l.zero() {
		return nil, errZeroLocker
	}
	return l.acquire(ctx, key, tryOnce)
}

// tryOnce is TryAcquire's tries: one round, no wait for young nodes.
const tryOnce = 0

func (l *Locker) acquire(ctx context.Context, key string, tries int) (*Lock, error) {
	if l.obs == nil {
		return l.runAcquisition(ctx, key, tries)
	}
	ctx = l.begin(ctx, EventAcquire, key)
	start := l.o.clock.Now()
	lock, err := l.runAcquisition(ctx, key, tries)
	l.observeAcquire(ctx, key, start, lock, err)
	return lock, err
}

// runAcquisition checks the key and the context, sets up an acquisition
// of the key and runs it.
func (l *Locker) runAcquisition(ctx context.Context, key string, tries int) (*Lock, error) {
	if key == "" {
		return nil, invalid("key is empty")
	}
	if ctx == nil {
		return nil, invalid("context is nil")
	}
	if !l.enter(nil) {
		return nil, l.closedError(OpAcquire, key)
	}
	defer l.leave(nil)
	kind, err := l.newMutex(key)
	if err != nil {
		return nil, err
	}
	a := &acquisition{l: l, ctx: ctx, key: key, kind: kind, tries: tries}
	if l.wake && kind.queue() != "" {
		a.wait = l.newHandoffWaiter(ctx, kind, tries > 1)
	} else {
		a.wait = pollWaiter{ctx: ctx, clock: l.o.clock, closing: l.closing}
	}
	return a.run()
}

// storedKeys returns the key as stored and, with fencing, its counter's
// key, or refuses a key the protocol cannot use.
func (l *Locker) storedKeys(key string) (rkey, fence string, err error) {
	rkey = l.o.keyPrefix + key
	switch rkey {
	case driver.BirthKey:
		return "", "", invalid("key %q is reserved for the restart guard (BirthKey)", rkey)
	case driver.IdentityKey:
		return "", "", invalid("key %q is reserved for the servers' identities (IdentityKey)", rkey)
	}
	if !l.o.fencing {
		return rkey, "", nil
	}
	fence, ok := driver.FenceKey(rkey)
	if !ok {
		name := strconv.Quote(key)
		if l.o.keyPrefix != "" {
			name += " (with the key prefix: " + strconv.Quote(rkey) + ")"
		}
		return "", "", invalid("key %s has no hash tag and contains \"}\", so no fencing counter can share its cluster slot (see FenceKey); put the key in a hash tag, such as {%s}", name, key)
	}
	return rkey, fence, nil
}

// acquisition is the state of one Acquire or TryAcquire between rounds.
type acquisition struct {
	l     *Locker
	ctx   context.Context
	key   string   // as the user gave it
	kind  lockKind // what a round sends (protocol.go)
	tries int
	wait  waiter // how it waits between rounds (wait.go)

	last *QuorumError // the last round's error
	// rounds counts every round; counted leaves out follow-ups, which use
	// up no try (docs/design.md, what counts as a try).
	rounds, counted int
	// guard is the wait for young nodes before the next round; guarded,
	// the sum of such waits.
	guard, guarded time.Duration
}

// run makes rounds until one wins or the acquisition gives up.
func (a *acquisition) run() (*Lock, error) {
	defer a.wait.leave()
	round := !a.wait.queueFirst()
	for {
		if err := contextError(a.ctx); err != nil {
			if a.last == nil {
				a.last = a.l.notTried(OpAcquire, a.key, errNoNodeAsked)
			}
			a.last.Context = err
			return nil, a.last
		}
		if round {
			if lock, done, err := a.try(); done {
				return lock, err
			}
		}
		var closed bool
		if round, closed = a.wait.wait(a.last, a.delay()); closed {
			if a.last == nil {
				return nil, a.l.closedError(OpAcquire, a.key)
			}
			return nil, errors.Join(a.l.closedError(OpAcquire, a.key), a.last)
		}
	}
}

// try is one try of the acquisition: a round (and, after a last try that
// split, its leader rounds). It reports done when the acquisition
// ends with its result.
func (a *acquisition) try() (lock *Lock, done bool, err error) {
	l := a.l
	woken, followUp := a.wait.startRound()
	a.rounds++
	if !followUp {
		a.counted++
	}
	lock, qe, handed := l.acquireOnce(a.ctx, a.key, a.kind, woken)
	if a.counted >= a.tries && split(qe, handed) {
		lock, qe = a.settle(qe)
	}
	a.wait.endRound(qe, handed)
	if qe == nil {
		lock.tries = a.rounds
		lock, err = l.register(lock)
		return lock, true, err
	}
	qe.Tries = a.rounds
	a.last = qe
	if a.guard = l.guardDelay(a.ctx, qe, a.tries, &a.guarded); a.guard > 0 {
		a.counted-- // waiting for young nodes uses up no try
	}
	if qe.Context != nil || a.counted >= a.tries {
		return nil, true, qe
	}
	return nil, false, nil
}

// splitRounds is how many leader rounds an acquisition makes at most after
// its last try, while each may have split the votes.
const splitRounds = 3

// settle makes leader rounds after a last try that may have split the
// votes, until one wins or no longer may have split, at most splitRounds
// (docs/design.md, split votes). They use up no try. Refused, it returns
// the error of the round that split, which asked the nodes that a leader
// round refused at its first node does not; any other outcome, its own.
func (a *acquisition) settle(splitErr *QuorumError) (*Lock, *QuorumError) {
	for range splitRounds {
		a.rounds++
		lock, qe, handed := a.l.acquireOnce(a.ctx, a.key, a.kind, wokenBySplit)
		switch {
		case qe == nil:
			return lock, nil
		case qe.Reason != ErrNotAcquired || qe.Context != nil:
			return nil, qe
		case !split(qe, handed):
			return nil, splitErr
		}
	}
	return nil, splitErr
}

// split reports whether a lost round may have split the votes, leaving no
// holder: it set the key on some nodes (released since), short of a
// quorum, it lost to refusals rather than an outage or the caller's
// context, and its clean-up handed the key to no queued waiter. A round
// that set the key nowhere leaves the split to those that did.
func split(qe *QuorumError, handed bool) bool {
	if qe == nil || handed || qe.Reason != ErrNotAcquired || qe.Context != nil {
		return false
	}
	ok, _, _ := qe.Counts()
	return ok > 0 && ok < qe.Quorum
}

// delay returns the wait before the next round: the retry policy's, or
// the restart guard's (the waiter may shorten it after a notice).
func (a *acquisition) delay() time.Duration {
	delay := max(a.l.o.retry(max(a.counted, 1)), MinRetryDelay)
	if a.guard > 0 {
		delay, a.guard = a.guard, 0
	}
	return delay
}
