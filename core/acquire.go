package core

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is Acquire's loop of rounds, and how it waits between them
// (a waiter: pollWaiter here, handoffWaiter in handoff.go); why it waits
// as it does: docs/design.md, Acquire's loop.

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
	return l.acquire(ctx, target{key: key}, l.o.tries)
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
	return l.acquire(ctx, target{key: key}, tryOnce)
}

// AcquireAll takes one lock on every key at once, as Acquire takes one: on
// each node, all the keys or none, and a quorum of nodes makes the lock.
// Two locks whose key sets overlap (or a set and a lock on one of its
// keys, of any kind) never both hold. The keys are taken in sorted order
// whatever order they are given in; the lock's Key is them joined by
// commas, and Keys returns them. On Redis Cluster nodes the keys must share
// a slot: put them in one hash tag, such as {orders}:1 and {orders}:2.
//
// Its errors are Acquire's; no keys, an empty key, a key given twice or
// keys in different slots of a cluster match ErrInvalidArgument. A waiter
// is handed the lock on its first key's release; otherwise it polls
// (docs/locks.md).
func (l *Locker) AcquireAll(ctx context.Context, keys ...string) (*Lock, error) {
	return l.acquireSet(ctx, keys, -1)
}

// TryAcquireAll makes one round to take the lock on every key, as
// TryAcquire does for one key. Its errors are those of AcquireAll.
func (l *Locker) TryAcquireAll(ctx context.Context, keys ...string) (*Lock, error) {
	return l.acquireSet(ctx, keys, tryOnce)
}

// AcquireShared takes a shared (read) lock on key, as Acquire takes a lock:
// any number of shared locks hold a key at once, and none while a lock
// (Acquire's, a writer's) holds it. Once a writer waits for the shared
// holders, new shared locks wait behind it. A shared lock is extended,
// kept alive, released and lost as any other, and carries a fencing token
// with WithFencing (a writer's token is greater than every one before
// it). Its errors are Acquire's (docs/locks.md).
func (l *Locker) AcquireShared(ctx context.Context, key string) (*Lock, error) {
	if l.zero() {
		return nil, errZeroLocker
	}
	return l.acquire(ctx, target{key: key, shared: true}, l.o.tries)
}

// TryAcquireShared makes one round to take a shared lock on key, as
// TryAcquire does. Its errors are those of Acquire.
func (l *Locker) TryAcquireShared(ctx context.Context, key string) (*Lock, error) {
	if l.zero() {
		return nil, errZeroLocker
	}
	return l.acquire(ctx, target{key: key, shared: true}, tryOnce)
}

// tryOnce is TryAcquire's tries: one round, no wait for young nodes.
const tryOnce = 0

// acquireSet is AcquireAll, or TryAcquireAll with tries tryOnce; tries
// -1 is the Locker's.
func (l *Locker) acquireSet(ctx context.Context, keys []string, tries int) (*Lock, error) {
	if l.zero() {
		return nil, errZeroLocker
	}
	t, err := setTarget(keys)
	if err != nil {
		if l.obs != nil { // reported as Acquire reports a bad key
			t = target{key: strings.Join(keys, ","), set: []string{}}
			l.observeAcquire(l.begin(ctx, OpAcquire, t.key), t, l.o.clock.Now(), nil, err)
		}
		return nil, err
	}
	if tries < 0 {
		tries = l.o.tries
	}
	return l.acquire(ctx, t, tries)
}

func (l *Locker) acquire(ctx context.Context, t target, tries int) (*Lock, error) {
	if l.obs == nil {
		return l.runAcquisition(ctx, t, tries)
	}
	ctx = l.begin(ctx, OpAcquire, t.key)
	start := l.o.clock.Now()
	lock, err := l.runAcquisition(ctx, t, tries)
	l.observeAcquire(ctx, t, start, lock, err)
	return lock, err
}

// runAcquisition checks the target and the context, sets up an
// acquisition of the target and runs it.
func (l *Locker) runAcquisition(ctx context.Context, t target, tries int) (*Lock, error) {
	key := t.key
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
	kind, err := l.newKind(t)
	if err != nil {
		return nil, err
	}
	a := &acquisition{l: l, ctx: ctx, key: key, kind: kind, tries: tries}
	if tries > 1 && !kind.shares() && a.handoff() && l.yielding(kind.stored()) {
		// Just handed to a waiter here: queue behind it, no round first
		// (docs/design.md, yielding).
		a.wait = l.newHandoffWaiter(ctx, kind, true)
	}
	return a.run()
}

// handoff reports whether the acquisition's waits can end at a hand-off
// (WithWakeOnRelease, a herald that can watch, a key with a wait queue).
func (a *acquisition) handoff() bool { return a.l.wake && a.kind.queue() != "" }

// newWaiter returns the acquisition's waiter, made when it first waits;
// with force, a handoffWaiter queues even if the lock is free.
func (a *acquisition) newWaiter(force bool) waiter {
	if a.handoff() {
		return a.l.newHandoffWaiter(a.ctx, a.kind, force)
	}
	return pollWaiter{ctx: a.ctx, clock: a.l.o.clock, closing: a.l.closing}
}

// target is what an acquisition takes: a key (a mutex, or with shared a
// read lock), or with set a set of keys, in canonical order.
type target struct {
	key    string   // the key, or the set's keys joined by commas
	set    []string // a multi-key lock's keys, sorted; nil otherwise
	shared bool     // a read lock
	// sem: a permit of the semaphore key of permits (semaphore.go).
	sem     bool
	permits int
	// candidate is a leader's value (Campaign); "" for other kinds.
	candidate string
}

// newKind returns the lock kind of t, or refuses keys the protocol cannot
// use.
func (l *Locker) newKind(t target) (lockKind, error) {
	switch {
	case t.set != nil:
		return l.newKeySet(t.set)
	case t.shared:
		return l.newShared(t.key)
	case t.sem:
		return l.newSemaphore(t.key, t.permits)
	case t.candidate != "":
		return l.newElection(t.key, t.candidate)
	}
	return l.newMutex(t.key)
}

// setTarget returns the target of a multi-key lock on keys, sorted, or
// refuses an empty set, an empty key or a key given twice.
func setTarget(keys []string) (target, error) {
	if len(keys) == 0 {
		return target{}, invalid("no keys")
	}
	set := slices.Clone(keys)
	slices.Sort(set)
	for i, k := range set {
		switch {
		case k == "":
			return target{}, invalid("key is empty")
		case i > 0 && set[i-1] == k:
			return target{}, invalid("key %q is given twice", k)
		}
	}
	return target{key: strings.Join(set, ","), set: set}, nil
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
	// wait is how it waits between rounds, nil until it first waits (or
	// when it queues before its first round).
	wait waiter

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
	defer func() {
		if a.wait != nil {
			a.wait.leave()
		}
	}()
	round := a.wait == nil // a waiter made before: queue first
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
	woken, followUp := wokenByNothing, false
	if a.wait != nil {
		woken, followUp = a.wait.startRound()
	}
	a.rounds++
	if !followUp {
		a.counted++
	}
	lock, qe, handed := a.sweep(woken)
	if a.wait != nil {
		a.wait.endRound(qe, handed)
	}
	if qe == nil {
		lock.tries = a.rounds
		lock, err = l.register(lock)
		return lock, true, err
	}
	qe.Tries = a.rounds
	a.last = qe
	if a.guard = l.guardDelay(a.ctx, qe, a.kind, a.tries, &a.guarded); a.guard > 0 {
		a.counted-- // waiting for young nodes uses up no try
	}
	if qe.Context != nil || a.counted >= a.tries {
		return nil, true, qe
	}
	if a.wait == nil {
		a.wait = a.newWaiter(handed) // queue behind the waiter its clean-up woke
	}
	return nil, false, nil
}

// round is one round for the lock k (the acquisition's kind, or one slot
// of its semaphore), and after a last try that split, its leader rounds.
func (a *acquisition) round(k lockKind, woken wakeKind) (*Lock, *QuorumError, bool) {
	lock, qe, handed := a.l.acquireOnce(a.ctx, a.key, k, woken, a.counted < a.tries)
	if a.counted >= a.tries && split(qe, handed) {
		lock, qe = a.settle(k, qe)
	}
	return lock, qe, handed
}

// sweep is one try of the acquisition: a round (round), or for a
// semaphore a round per slot, from a random one, until one wins or one
// loses for another reason than a holder. It reports whether any clean-up
// handed the key on.
func (a *acquisition) sweep(woken wakeKind) (lock *Lock, qe *QuorumError, handed bool) {
	s, ok := a.kind.(*semaphore)
	if !ok {
		return a.round(a.kind, woken)
	}
	start := rand.IntN(len(s.slots))
	for j := range s.slots {
		if j > 0 {
			a.rounds++
		}
		var h bool
		lock, qe, h = a.round(s.slots[(start+j)%len(s.slots)], woken)
		handed = handed || h
		if qe == nil || qe.Reason != ErrNotAcquired || qe.Context != nil {
			break
		}
	}
	return lock, qe, handed
}

// splitRounds is how many leader rounds an acquisition makes at most after
// its last try, while each may have split the votes.
const splitRounds = 3

// settle makes leader rounds after a last try that may have split the
// votes, until one wins or no longer may have split, at most splitRounds
// (docs/design.md, split votes). They use up no try. Refused, it returns
// the error of the round that split, which asked the nodes that a leader
// round refused at its first node does not; any other outcome, its own.
func (a *acquisition) settle(k lockKind, splitErr *QuorumError) (*Lock, *QuorumError) {
	for range splitRounds {
		a.rounds++
		lock, qe, handed := a.l.acquireOnce(a.ctx, a.key, k, wokenBySplit, false)
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

// waiter is how an acquisition waits between its rounds. The acquisition
// calls startRound and endRound around each round, and wait between two.
type waiter interface {
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

// handedOver records that this Locker's release handed rkey to a waiter
// (see yielding).
func (l *Locker) handedOver(rkey string) {
	now := l.o.clock.Now()
	l.yieldMu.Lock()
	defer l.yieldMu.Unlock()
	if len(l.yields) >= maxYields {
		for k, until := range l.yields {
			if !now.Before(until) {
				delete(l.yields, k)
			}
		}
	}
	if len(l.yields) < maxYields {
		l.yields[rkey] = now.Add(l.o.nodeTimeout)
	}
	l.yieldN.Store(int32(len(l.yields)))
}

// maxYields bounds the keys a Locker remembers having handed over.
const maxYields = 1024

// yielding reports whether this Locker handed rkey to a waiter within the
// last node timeout, and forgets it (docs/design.md, yielding).
func (l *Locker) yielding(rkey string) bool {
	if l.yieldN.Load() == 0 {
		return false
	}
	l.yieldMu.Lock()
	defer l.yieldMu.Unlock()
	until, ok := l.yields[rkey]
	if !ok {
		return false
	}
	delete(l.yields, rkey)
	l.yieldN.Store(int32(len(l.yields)))
	return l.o.clock.Now().Before(until)
}
