package core

import (
	"context"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is the counting semaphore: K permits of a key, each an
// ordinary quorum lock on its own slot key (driver.PermitKey). Two holders
// of one slot would need intersecting quorums on it, as two holders of a
// mutex would: K slots admit K holders at most, for every K, N and quorum.
// Why the plain-majority semaphore is not safe: docs/safety.md, semaphores.

// maxPermits is the most permits a semaphore has: a sweep makes a round
// per slot, and a waiter's enqueue names every slot.
const maxPermits = 1024

// AcquirePermit takes one of the permits of the semaphore key, which
// admits permits holders at once, as Acquire takes a lock: each try is a
// sweep of rounds over the permit slots, one slot at a time from a random
// one, until one wins; only after a sweep lost does it wait (the retry
// delay, or a hand-off: any permit's release wakes the oldest waiter). The
// Lock holds one slot: it is extended, kept alive, released and lost as
// any other, Key returns key, and with WithFencing its token comes from
// one counter per semaphore, so tokens increase across all its permits.
//
// The slot keys are the truth: a call with another permits count on the
// same key sweeps its own slots 0 to permits-1, so the key admits as many
// holders as the largest count in use. permits below 1 or above 1024
// matches ErrInvalidArgument, as does a key whose slots cannot share its
// cluster slot; other errors are Acquire's (docs/locks.md, semaphores).
func (l *Locker) AcquirePermit(ctx context.Context, key string, permits int) (*Lock, error) {
	if l.zero() {
		return nil, errZeroLocker
	}
	return l.acquire(ctx, target{key: key, sem: true, permits: permits}, l.o.tries)
}

// TryAcquirePermit makes one sweep to take a permit of the semaphore key,
// without waiting: up to permits rounds, one per slot, so that it does not
// fail while a permit is plainly free. Its errors are AcquirePermit's.
func (l *Locker) TryAcquirePermit(ctx context.Context, key string, permits int) (*Lock, error) {
	if l.zero() {
		return nil, errZeroLocker
	}
	return l.acquire(ctx, target{key: key, sem: true, permits: permits}, tryOnce)
}

// InspectPermits reads what every node holds in each permit slot of the
// semaphore key, as Inspect reads a key: one KeyState per slot, in slot
// order, whose Key names the slot (driver.PermitKey of key) and whose Held
// reports the permit in use. Its errors are Inspect's and
// AcquirePermit's.
func (l *Locker) InspectPermits(ctx context.Context, key string, permits int) ([]*KeyState, error) {
	if err := l.readArgs(ctx, key); err != nil {
		return nil, err
	}
	if !l.enter(nil) {
		return nil, l.closedError(OpInspect, key)
	}
	defer l.leave(nil)
	s, err := l.newSemaphore(key, permits)
	if err != nil {
		return nil, err
	}
	states := make([]*KeyState, len(s.slots))
	for i, slot := range s.slots {
		name, _ := driver.PermitKey(key, i)
		if states[i], err = l.inspect(ctx, name, slot.rkey); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// permit is one slot of a semaphore: a mutex on the slot key whose wait
// queue, release notices and fencing counter are the semaphore's.
type permit struct {
	*mutex
	sem string // the semaphore's key as stored
}

// stored is the semaphore's key: a permit's release hands over, and
// yields, the semaphore (acquire.go, yielding).
func (p *permit) stored() string { return p.sem }

// semaphore is what an acquisition of a permit takes: one of its slots,
// each sweep trying them in turn (acquisition.sweep). Where one kind is
// needed (its waiter, the restart guard's wait) it acts as its first slot,
// whose stored key and queue are the semaphore's.
type semaphore struct {
	*permit
	slots []*permit
}

// newSemaphore returns the semaphore of permits slots on key, or refuses
// a count out of range, or a key the protocol cannot use or whose slots
// cannot share its cluster slot.
func (l *Locker) newSemaphore(key string, permits int) (*semaphore, error) {
	if permits < 1 || permits > maxPermits {
		return nil, invalid("permits %d must be 1 to %d", permits, maxPermits)
	}
	rkey, fence, err := l.storedKeys(key)
	if err != nil {
		return nil, err
	}
	// Its queue, notices and counter are its own, not those of a lock of
	// another kind on key (driver.SemaphoreKey).
	base, ok := driver.SemaphoreKey(rkey)
	if !ok {
		return nil, untagged(key, "its permit slots cannot share")
	}
	q, _ := driver.QueueKey(base)
	if fence != "" {
		fence, _ = driver.FenceKey(base)
	}
	s := &semaphore{slots: make([]*permit, permits)}
	for i := range s.slots {
		slot, _ := driver.PermitKey(rkey, i) // in base's cluster slot, as base is
		s.slots[i] = &permit{mutex: l.mutexOn(slot, q, base, fence), sem: base}
	}
	s.permit = s.slots[0]
	return s, nil
}
