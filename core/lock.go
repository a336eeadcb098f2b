package core

import (
	"context"
	"errors"
	"fmt"
	"github.com/quorumlock/quorumlock/core/driver"
	"strconv"
	"sync"
	"time"
)

// Lock is a held lock: an immutable identity (key and random value), an
// optional fencing token, and the time until which holding it is safe. It
// is safe for concurrent use; Extend and Release run one at a time. Methods
// on a nil *Lock return ErrNotHeld.
//
// A lock ends when it is released, when an extension finds it lost, or
// when its validity runs out; Done and Err report it, and Context derives a
// context that ends with it. KeepAlive extends it automatically until then.
type Lock struct {
	locker *Locker
	key    string // as given by the user
	rkey   string // as stored: with the key prefix
	value  string
	token  int64
	taken  time.Time     // start of the acquiring round
	relErr releasedError // the cause once released (kept here: no allocation)
	nodes  []NodeResult  // the acquiring round's results, kept only for an Observer
	tries  int           // rounds the acquisition made, for the Observer

	op sync.Mutex // serialises Extend and Release (and keep-alive renewals)

	mu       sync.Mutex
	deadline time.Time // validity ends; zero once released or lost
	state    lockState
	cause    error         // why the lock ended; nil while held
	done     chan struct{} // made on demand; closed when the lock ends
	hooks    []*endHook    // called when the lock ends
	timer    driver.Timer  // fires at the deadline while someone watches
	released []NodeResult  // the last release's results while it may be tried again
	keptErr  error         // the keep-alive's last failed extension
	capped   bool          // the keep-alive stopped at the maximum hold time
}

type lockState uint8

const (
	stateHeld lockState = iota
	stateReleased
	stateLost
)

// endHook is a function to call with the cause when the lock ends.
type endHook struct{ fn func(cause error) }

// closedChan is the Done channel of a lock that had ended before anyone
// asked for it.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Key returns the key the lock was acquired for, without the Locker's key
// prefix.
func (k *Lock) Key() string {
	if k == nil || k.locker == nil {
		return ""
	}
	return k.key
}

// Value returns the random value that identifies this acquisition on the
// nodes: 20 bytes from crypto/rand, base64url encoded.
func (k *Lock) Value() string {
	if k == nil || k.locker == nil {
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
	if k == nil || k.locker == nil {
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

// Token returns the lock's fencing token when the Locker has fencing on
// (WithFencing), and 0 otherwise.
//
// The token is larger than the token of every acquisition of the same key
// (and the same key prefix) that completed before this one began, through
// any Locker over the same nodes, whatever quorum of nodes granted it. Hand
// it to the storage the lock protects with every write, and have the storage
// refuse a write whose token is lower than the highest it has seen: a holder
// that paused past its validity (GC, swap, a slow network) then cannot
// overwrite the work of the holder after it. Tokens grow but are not
// consecutive: failed rounds use numbers up.
//
// How: each node keeps a counter beside the key (FenceKey, in the key's
// cluster slot, never expiring). The acquiring script increments it on
// every node that grants the lock; the token is the largest of the granting
// nodes' values; and before the lock is handed out, a second step raises
// the counter to the token on every node that answered (granted, refused,
// or was found young by the restart guard), of which a quorum must confirm
// (nothing is sent when every node that answered returned the token). Any
// later acquisition needs a quorum, which shares at least one node with
// that one, whose counter it then takes above the token.
//
// The guarantee assumes that nodes keep their counters: a node restarted
// without persistence, or whose data was flushed, forgets it. It holds as
// long as, of the nodes raised for an acquisition, at least one keeps its
// counter and takes part in the next quorum. With persistence that keeps
// every write (AOF with appendfsync always) on every node it always holds.
// Without, raising every node that answered means one restart cannot lower
// a later token when every node answered as it was issued, and a restarted
// node is raised again by each acquisition while the restart guard holds
// its vote back; but a token can repeat when a later quorum's only raised
// nodes have restarted empty (three nodes: C down while A and B issue the
// token, A restarted, no acquisition while A is young, then A and C grant).
// It also assumes that no one else writes the counter keys.
func (k *Lock) Token() int64 {
	if k == nil || k.locker == nil {
		return 0
	}
	return k.token
}

// Done returns a channel that is closed when the lock ends: released,
// found lost by an extension, or past its validity. Err then says why.
// Asking for it arms a timer at the end of the validity; a lock nobody
// watches costs no timer.
func (k *Lock) Done() <-chan struct{} {
	if k == nil || k.locker == nil {
		return closedChan
	}
	k.mu.Lock()
	if k.done == nil {
		if k.state != stateHeld {
			k.done = closedChan
		} else {
			k.done = make(chan struct{})
			k.armLocked()
		}
	}
	done := k.done
	k.mu.Unlock()
	return done
}

// Err returns nil while the lock is held and valid, and otherwise why it
// ended: an error matching ErrReleased after Release or the Locker's
// Close; one matching ErrLockLost after an extension found the lock gone
// from too many nodes (with the extension's *QuorumError inside), or when
// its validity ran out (also matching ErrValidityExpired, and ErrUnavailable
// with the last failed extension when the keep-alive could not reach a
// quorum, or ErrMaxHold when it stopped at the maximum hold time).
func (k *Lock) Err() error {
	if k == nil || k.locker == nil {
		return fmt.Errorf("quorumlock: nil lock: %w", ErrNotHeld)
	}
	k.mu.Lock()
	if k.state == stateHeld && !k.locker.o.clock.Now().Before(k.deadline) {
		cause := k.expiredCauseLocked()
		k.mu.Unlock()
		k.finish(stateLost, cause)
		k.mu.Lock()
	}
	cause := k.cause
	k.mu.Unlock()
	return cause
}

// Context returns a copy of parent that is cancelled when the lock ends,
// with Err as its cause (context.Cause), and a function that detaches it
// from the lock and cancels it. Call the function when done with the
// context, as with context.WithCancel.
func (k *Lock) Context(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancelCause(parent)
	if k == nil || k.locker == nil {
		cancel(fmt.Errorf("quorumlock: nil lock: %w", ErrNotHeld))
		return ctx, func() {}
	}
	detach := k.onEnd(cancel)
	return ctx, func() {
		detach()
		cancel(context.Canceled)
	}
}

// onEnd arranges for fn to be called with the cause when the lock ends (at
// once if it has), and returns a function that cancels the arrangement.
func (k *Lock) onEnd(fn func(cause error)) (detach func()) {
	if cause := k.Err(); cause != nil {
		fn(cause)
		return func() {}
	}
	h := &endHook{fn: fn}
	k.mu.Lock()
	if k.state != stateHeld {
		cause := k.cause
		k.mu.Unlock()
		fn(cause)
		return func() {}
	}
	k.hooks = append(k.hooks, h)
	k.armLocked()
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		for i, g := range k.hooks {
			if g == h {
				k.hooks = append(k.hooks[:i], k.hooks[i+1:]...)
				break
			}
		}
	}
}

// armLocked starts the deadline timer if none runs; k.mu is held.
func (k *Lock) armLocked() {
	if k.timer != nil || k.state != stateHeld {
		return
	}
	k.timer = k.locker.o.clock.AfterFunc(k.deadline.Sub(k.locker.o.clock.Now()), k.deadlinePassed)
}

// deadlinePassed runs when the deadline timer fires: it ends the lock if
// its validity is over, and otherwise (an extension moved the deadline)
// arms the timer again.
func (k *Lock) deadlinePassed() {
	k.mu.Lock()
	k.timer = nil
	if k.state != stateHeld {
		k.mu.Unlock()
		return
	}
	if k.locker.o.clock.Now().Before(k.deadline) {
		k.armLocked()
		k.mu.Unlock()
		return
	}
	cause := k.expiredCauseLocked()
	k.mu.Unlock()
	k.finish(stateLost, cause)
}

// expiredCauseLocked is the cause of a lock whose validity ran out; k.mu
// is held.
func (k *Lock) expiredCauseLocked() error {
	switch {
	case k.capped:
		return fmt.Errorf("quorumlock: lock %q lost: validity ran out after the keep-alive stopped: %w: %w: %w",
			k.key, ErrLockLost, ErrValidityExpired, ErrMaxHold)
	case k.keptErr != nil:
		return fmt.Errorf("quorumlock: lock %q lost: validity ran out before an extension reached a quorum: %w: %w: %w",
			k.key, ErrLockLost, ErrValidityExpired, k.keptErr)
	default:
		return fmt.Errorf("quorumlock: lock %q lost: validity ran out: %w: %w", k.key, ErrLockLost, ErrValidityExpired)
	}
}

// finish ends the lock: it records the state and cause, closes Done, runs
// the hooks and takes the lock out of the keeper. A held lock may become
// released or lost, and a lost one released (so that a second Release is
// a no-op); the first cause stays.
func (k *Lock) finish(s lockState, cause error) {
	k.mu.Lock()
	if k.state != stateHeld {
		if s == stateReleased {
			k.state = s
		}
		k.mu.Unlock()
		return
	}
	k.state, k.cause, k.deadline = s, cause, time.Time{}
	if k.done != nil {
		close(k.done)
	} else {
		k.done = closedChan
	}
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	hooks := k.hooks
	k.hooks = nil
	k.mu.Unlock()
	for _, h := range hooks {
		h.fn(cause)
	}
	// After the state: the keeper adds only held locks (keeper.add).
	k.locker.keeper.drop(k)
	if obs := k.locker.obs; obs != nil && s == stateLost {
		obs.Observe(context.Background(), Event{Kind: EventLost, Key: k.key, Start: k.locker.o.clock.Now(), Err: cause})
	}
}

// releasedError is the cause of a released lock. Release makes one on
// every call, so it is a plain value, formatted only if someone asks.
type releasedError struct{ key string }

func (e *releasedError) Error() string {
	return "quorumlock: lock " + strconv.Quote(e.key) + ": released"
}
func (e *releasedError) Unwrap() error { return ErrReleased }

// lose ends the lock after an extension found it gone.
func (k *Lock) lose(qe *QuorumError) {
	k.finish(stateLost, fmt.Errorf("quorumlock: lock %q lost: %w: %w", k.key, ErrLockLost, qe))
}

// Release deletes the lock on every node where it still holds this lock's
// value, whatever the strategy (Redlock rule 6). It runs even if ctx has
// already ended (a deferred Release after a cancellation must still free
// the lock), bounded by the node timeout. Release stops the keep-alive and
// returns once its goroutine, if this was its last lock, has ended.
//
// It returns nil when a quorum of nodes deleted the lock. It returns a
// *QuorumError matching ErrNotHeld when too few nodes still held it for this
// owner to have held the lock at release time (it had expired or been taken
// over), and one matching ErrUnavailable when node failures leave that
// unknown. A Release that did not reach a quorum because nodes failed can
// be called again: it asks the nodes that failed again (the others
// answered already), and the Locker's Close does so too; keys it cannot
// delete expire with the TTL. Such a retry returns nil once every node has
// answered, since none then holds the lock (the first call may have
// deleted it where its reply was lost). Once a quorum deleted the lock, or
// no node is left to ask, Release returns nil without asking any node;
// after the Locker's Close, a Release still to be tried again returns
// ErrClosed.
func (k *Lock) Release(ctx context.Context) error {
	if k == nil || k.locker == nil {
		return fmt.Errorf("quorumlock: release of a nil lock: %w", ErrNotHeld)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	k.mu.Lock()
	again := k.released != nil
	k.mu.Unlock()
	if again {
		// A retry asks the nodes: Close must wait for it, and it must not
		// run after Close closed them.
		if !k.locker.enter(nil) {
			return k.locker.closedError(OpRelease, k.key)
		}
		defer k.locker.leave(nil)
	}
	return k.release(ctx)
}

func (k *Lock) release(ctx context.Context) error {
	k.op.Lock()
	defer k.op.Unlock()
	k.mu.Lock()
	state, prev := k.state, k.released
	k.mu.Unlock()
	if state == stateReleased && prev == nil {
		return nil
	}

	l := k.locker
	var start time.Time // read only for an Observer
	if l.obs != nil {
		start = l.o.clock.Now()
	}
	if state != stateReleased {
		// Stop the keep-alive first, so that no renewal follows the release.
		k.relErr.key = k.key
		k.finish(stateReleased, &k.relErr)
		l.keeper.idle()
	}
	results, handed := l.releaseAll(detached(ctx), k.rkey, k.value, true, prev)
	if handed {
		l.handedOver(k.rkey)
	}
	var again []NodeResult // kept while the outcome is open
	if retryable(results, l.o.quorum) {
		again = results
	}
	k.mu.Lock()
	k.released = again
	k.mu.Unlock()
	if again == nil {
		l.unregister(k)
	}

	err := releaseOutcome(k.key, l.o.quorum, results)
	if prev != nil && errors.Is(err, ErrNotHeld) {
		// Tried again, and no node holds the lock any more: a node that
		// failed before may have deleted it then (a reply lost, or a call
		// that ran once a hung server resumed). Whether the lock was still
		// held at the first Release, that one said: unknown.
		err = nil
	}
	if l.obs != nil {
		l.obs.Observe(ctx, Event{Kind: EventRelease, Key: k.key, Start: start, Duration: l.o.clock.Now().Sub(start), Err: err, Nodes: results})
	}
	return err
}

// retryable reports whether a release round left the outcome open: no
// quorum deleted the lock, and some node did not answer.
func retryable(results []NodeResult, q int) bool {
	ok, refused, _ := tally(results)
	return ok < q && ok+refused < len(results)
}

// releaseOutcome is Release's error for a release round's results: nil when
// a quorum deleted the lock.
func releaseOutcome(key string, q int, results []NodeResult) error {
	ok, _, failed := tally(results)
	if ok >= q {
		return nil
	}
	qe := &QuorumError{Op: OpRelease, Key: key, Quorum: q, Nodes: results}
	switch {
	case ok+failed >= q:
		qe.Reason = ErrUnavailable
	default:
		qe.Reason = ErrNotHeld
	}
	return qe
}

// hold is a holder at work (Lock.Hold): Close cancels it and waits for it.
type hold struct{ cancel context.CancelCauseFunc }

// Hold keeps the lock alive (KeepAlive) for a holder about to work under
// it, and returns a context derived from parent that ends when the lock
// ends (its cause is Err) or when the Locker is closing (a cause matching
// ErrClosed), and a done function to call once the work is over, after
// Release. Until done is called, the Locker's Close and Shutdown wait
// instead of releasing the lock: a lock is never released under a holder
// still at work. done is idempotent. Locker.Do uses Hold; use it where Do
// does not fit (middleware/httplock does).
//
// Hold returns KeepAlive's errors, and ErrClosed once the Locker is
// closing.
func (k *Lock) Hold(parent context.Context) (ctx context.Context, done func(), err error) {
	if k == nil || k.locker == nil {
		return nil, nil, fmt.Errorf("quorumlock: hold of a nil lock: %w", ErrNotHeld)
	}
	if parent == nil {
		return nil, nil, invalid("context is nil")
	}
	l := k.locker
	hctx, hcancel := context.WithCancelCause(parent)
	h := &hold{cancel: hcancel}
	if !l.enter(h) {
		hcancel(nil)
		return nil, nil, l.closedError(OpExtend, k.key)
	}
	end := func() {
		hcancel(context.Canceled)
		l.leave(h)
	}
	if err := k.KeepAlive(); err != nil {
		end()
		return nil, nil, err
	}
	lctx, cancel := k.Context(hctx)
	var once sync.Once
	return lctx, func() { once.Do(func() { cancel(); end() }) }, nil
}

// Extend resets the lock's TTL on the nodes that still hold it, and
// succeeds only if a quorum did so before the current validity ran out
// (Redlock rule 7). The new validity is computed as for an acquisition,
// from the start of the extending round: TTL - elapsed - drift.
//
// A failed Extend returns a *QuorumError. ErrLockLost (the lock is no longer
// held on enough nodes) and ErrValidityExpired (the validity ran out before
// or during the round) mean the lock is gone: stop using the resource; Done
// is closed. ErrUnavailable means too many nodes failed to answer; the lock
// stays valid for what remains of Validity, and Extend may be tried again.
// Extending a released lock returns ErrNotHeld, and extending after the
// Locker's Close returns ErrClosed.
func (k *Lock) Extend(ctx context.Context) error {
	if k == nil || k.locker == nil {
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
	start := l.o.clock.Now()
	if !start.Before(deadline) {
		qe := l.notTried(OpExtend, k.key, ErrValidityExpired)
		qe.Validity = deadline.Sub(start)
		k.lose(qe)
		return qe
	}

	kv := []string{k.rkey, k.value, l.ttlMillis}
	keys, args := kv[:1:1], kv[1:]
	results := l.round(ctx, l.o.strategy, func(ctx context.Context, i int) (bool, error) {
		return l.scriptVote(ctx, i, driver.ScriptExtend, keys, args)
	})
	if qe := k.settleExtend(ctx, start, l.o.clock.Now(), deadline, results); qe != nil {
		qe.Context = contextError(ctx)
		_, _, failed := qe.Counts()
		if qe.Context != nil && errors.Is(qe.Reason, ErrUnavailable) && failed <= len(results)-l.o.quorum {
			// The caller's context cut the round short: the outcome is
			// unknown, Reason is nil and Context says why.
			qe.Reason = nil
		}
		return qe
	}
	return nil
}

// settleExtend applies the outcome of an extending round that ran from
// start to end while the lock's validity ended at deadline: the new
// deadline on success, the end of the lock when the round shows it gone.
// It returns nil on success; otherwise a *QuorumError whose Reason is
// ErrValidityExpired or ErrLockLost (the lock has ended) or ErrUnavailable
// (it is still valid until deadline).
func (k *Lock) settleExtend(ctx context.Context, start, end, deadline time.Time, results []NodeResult) *QuorumError {
	qe := k.settle(start, end, deadline, results)
	if obs := k.locker.obs; obs != nil {
		e := Event{Kind: EventExtend, Key: k.key, Start: start, Duration: end.Sub(start), Nodes: results}
		if qe != nil {
			e.Err = qe
		} else {
			e.Validity = k.Validity()
		}
		obs.Observe(ctx, e)
	}
	return qe
}

func (k *Lock) settle(start, end, deadline time.Time, results []NodeResult) *QuorumError {
	l := k.locker
	newDeadline := start.Add(l.o.ttl - l.o.drift())
	ok, refused, _ := tally(results)
	q := l.o.quorum
	// Success needs the quorum to have answered while the old validity
	// lasted, and validity left from the new round (a slow sequential round
	// over many nodes can use up TTL - drift on its own).
	if ok >= q && end.Before(deadline) && end.Before(newDeadline) {
		k.mu.Lock()
		if k.state == stateHeld {
			k.deadline = newDeadline
			k.keptErr = nil
		}
		k.mu.Unlock()
		return nil
	}
	qe := &QuorumError{Op: OpExtend, Key: k.key, Quorum: q, Nodes: results, Validity: newDeadline.Sub(end)}
	switch {
	case ok >= q:
		// The round finished after the old validity ended: another owner
		// may have taken the lock in between.
		qe.Reason = ErrValidityExpired
		qe.Validity = min(deadline.Sub(end), newDeadline.Sub(end))
		k.lose(qe)
	case refused > len(l.nodes)-q:
		qe.Reason = ErrLockLost
		k.lose(qe)
	default:
		qe.Reason = ErrUnavailable
	}
	return qe
}
