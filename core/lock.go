package core

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lock is a held lock: an immutable identity (key and random value) plus the
// time until which holding it is safe. It is safe for concurrent use;
// Extend and Release run one at a time. Methods on a nil *Lock return
// ErrNotHeld.
type Lock struct {
	locker *Locker
	key    string // as given by the user
	rkey   string // as stored: with the key prefix
	value  string

	op sync.Mutex // serialises Extend and Release

	mu       sync.Mutex
	deadline time.Time // validity ends; zero once released or lost
	state    lockState
}

type lockState uint8

const (
	stateHeld lockState = iota
	stateReleased
	stateLost
)

// Key returns the key the lock was acquired for, without the Locker's key
// prefix.
func (k *Lock) Key() string {
	if k == nil {
		return ""
	}
	return k.key
}

// Value returns the random value that identifies this acquisition on the
// nodes: 20 bytes from crypto/rand, base64url encoded.
func (k *Lock) Value() string {
	if k == nil {
		return ""
	}
	return k.value
}

// Validity returns how long holding the lock remains safe: the TTL minus the
// time the acquiring (or last extending) round took, minus the drift
// allowance, minus the time since that round. It is zero once the lock is
// released or lost. Do not start work on the protected resource that may
// outlast it.
func (k *Lock) Validity() time.Duration {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	deadline, state := k.deadline, k.state
	k.mu.Unlock()
	if state != stateHeld {
		return 0
	}
	return max(0, deadline.Sub(k.locker.o.clock.Now()))
}

// Release deletes the lock on every node where it still holds this lock's
// value, whatever the strategy (Redlock rule 6). It runs even if ctx has
// already ended (a deferred Release after a cancellation must still free
// the lock), bounded by the node timeout. Releasing twice is harmless: the
// second call returns nil without touching the nodes.
//
// It returns nil when a quorum of nodes deleted the lock. It returns a
// *QuorumError matching ErrNotHeld when too few nodes still held it for this
// owner to have held the lock at release time (it had expired or been taken
// over), and one matching ErrUnavailable when node failures leave that
// unknown; the keys left behind expire with the TTL.
func (k *Lock) Release(ctx context.Context) error {
	if k == nil {
		return fmt.Errorf("quorumlock: release of a nil lock: %w", ErrNotHeld)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return k.release(ctx)
}

func (k *Lock) release(ctx context.Context) error {
	k.op.Lock()
	defer k.op.Unlock()
	k.mu.Lock()
	released := k.state == stateReleased
	k.mu.Unlock()
	if released {
		return nil
	}

	l := k.locker
	rctx, cancel := l.detached(ctx)
	results := l.releaseAll(rctx, k.rkey, k.value)
	cancel()
	k.end(stateReleased)
	l.unregister(k)

	ok, _, failed := tally(results)
	q := l.o.quorum
	qe := &QuorumError{Op: OpRelease, Key: k.key, Quorum: q, Nodes: results}
	switch {
	case ok >= q:
		return nil
	case ok+failed >= q:
		qe.Reason = ErrUnavailable
	default:
		qe.Reason = ErrNotHeld
	}
	return qe
}

// Extend resets the lock's TTL on the nodes that still hold it, and
// succeeds only if a quorum did so before the current validity ran out
// (Redlock rule 7). The new validity is computed as for an acquisition,
// from the start of the extending round: TTL - elapsed - drift.
//
// A failed Extend returns a *QuorumError. ErrLockLost (the lock is no longer
// held on enough nodes) and ErrValidityExpired (the validity ran out before
// or during the round) mean the lock is gone: stop using the resource.
// ErrUnavailable means too many nodes failed to answer; the lock stays valid
// for what remains of Validity, and Extend may be tried again.
// Extending a released lock returns ErrNotHeld, and extending after the
// Locker's Close returns ErrClosed.
func (k *Lock) Extend(ctx context.Context) error {
	if k == nil {
		return fmt.Errorf("quorumlock: extend of a nil lock: %w", ErrNotHeld)
	}
	if ctx == nil {
		return invalid("context is nil")
	}
	k.op.Lock()
	defer k.op.Unlock()

	l := k.locker
	k.mu.Lock()
	deadline, state := k.deadline, k.state
	k.mu.Unlock()
	switch {
	case state == stateReleased && l.isClosed():
		return l.closedError(OpExtend, k.key)
	case state == stateReleased:
		return fmt.Errorf("quorumlock: extend %q: already released: %w", k.key, ErrNotHeld)
	case state == stateLost:
		return fmt.Errorf("quorumlock: extend %q: %w", k.key, ErrLockLost)
	}
	if err := contextError(ctx); err != nil {
		qe := l.notTried(OpExtend, k.key, nil)
		qe.Context = err
		return qe
	}
	ttl := l.o.ttl
	start := l.o.clock.Now()
	if !start.Before(deadline) {
		k.end(stateLost)
		qe := l.notTried(OpExtend, k.key, ErrValidityExpired)
		qe.Validity = deadline.Sub(start)
		return qe
	}

	keys, args := []string{k.rkey}, []string{k.value, millis(ttl)}
	results := l.round(ctx, l.o.strategy, func(ctx context.Context, i int) (bool, error) {
		return l.scriptVote(ctx, i, ScriptExtend, keys, args)
	})
	end := l.o.clock.Now()
	newDeadline := start.Add(ttl - l.o.drift())
	ok, refused, failed := tally(results)
	q := l.o.quorum
	qe := &QuorumError{Op: OpExtend, Key: k.key, Quorum: q, Nodes: results, Validity: newDeadline.Sub(end)}
	switch {
	// Success needs the quorum to have answered while the old validity
	// lasted, and validity left from the new round (a slow sequential round
	// over many nodes can use up TTL - drift on its own).
	case ok >= q && end.Before(deadline) && end.Before(newDeadline):
		k.mu.Lock()
		if k.state == stateHeld {
			k.deadline = newDeadline
		}
		k.mu.Unlock()
		return nil
	case ok >= q:
		// The round finished after the old validity ended: another owner
		// may have taken the lock in between.
		k.end(stateLost)
		qe.Reason = ErrValidityExpired
		qe.Validity = min(deadline.Sub(end), newDeadline.Sub(end))
	case refused > len(l.nodes)-q:
		k.end(stateLost)
		qe.Reason = ErrLockLost
	case failed > len(l.nodes)-q || ctx.Err() == nil:
		qe.Reason = ErrUnavailable
	}
	// Otherwise the caller's context cut the round short: the outcome is
	// unknown, Reason stays nil and Context says why.
	qe.Context = contextError(ctx)
	return qe
}

// end marks the lock released or lost.
func (k *Lock) end(s lockState) {
	k.mu.Lock()
	if k.state == stateHeld || s == stateReleased {
		k.state = s
	}
	k.deadline = time.Time{}
	k.mu.Unlock()
}
