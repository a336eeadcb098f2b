package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// Lock is a held lock: its key and random value, an optional fencing
// token, and the time until which holding it is safe. It is safe for
// concurrent use; Extend and Release run one at a time. Methods on a nil
// *Lock return ErrNotHeld. A lock ends when it is released, found lost by
// an extension, at risk (an extension failed and less than the at-risk
// margin of validity is left), or past its validity; Done and Err report
// it.
type Lock struct {
	locker *Locker
	key    string   // as given by the user
	kind   lockKind // what it sends to the nodes (protocol.go)
	value  string
	token  int64
	taken  time.Time     // start of the acquiring round
	relErr releasedError // the cause once released (kept here: no allocation)
	nodes  []NodeResult  // the acquiring round's results, kept only for an Observer
	tries  int           // rounds the acquisition made, for the Observer
	// skipped has the bits of the nodes the acquiring round never sent its
	// call (left out as suspect): releases leave them out.
	skipped uint64

	op sync.Mutex // serialises Extend and Release (and keep-alive renewals)

	mu       sync.Mutex
	deadline time.Time // validity ends; zero once released or lost
	state    lockState
	cause    error         // why the lock ended; nil while held
	done     chan struct{} // made on demand; closed when the lock ends
	hooks    []*endHook    // called when the lock ends
	timer    driver.Timer  // fires at the lock's end (endsLocked) while someone watches
	gen      uint64        // the timer's generation: an older one's firing is stale
	released []NodeResult  // the last release's results while it may be tried again
	keptErr  error         // the last extension's failure; nil after a success
	capped   bool          // the keep-alive stopped at the maximum hold time
	kept     bool          // the keeper has had it: Release and its end leave the keeper alone otherwise
}

type lockState uint8

const (
	stateHeld lockState = iota
	stateReleased
	stateLost
	stateAtRisk // ended, not released, still valid until the deadline
)

// endHook is a function to call with the cause when the lock ends.
type endHook struct{ fn func(cause error) }

// closedChan is the Done channel of a lock that ended before anyone asked.
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

// Keys returns the keys the lock holds, without the Locker's key prefix:
// a multi-key lock's (AcquireAll), sorted, or the one key.
func (k *Lock) Keys() []string {
	if k == nil || k.locker == nil {
		return nil
	}
	if s, ok := k.kind.(*keySet); ok {
		return slices.Clone(s.keys)
	}
	return []string{k.key}
}

// Shared reports whether the lock is a shared (read) lock (AcquireShared).
func (k *Lock) Shared() bool {
	if k == nil || k.locker == nil {
		return false
	}
	_, ok := k.kind.(*shared)
	return ok
}

// Value returns the random value that identifies this acquisition on the
// nodes: 20 bytes from crypto/rand, base64url encoded.
func (k *Lock) Value() string {
	if k == nil || k.locker == nil {
		return ""
	}
	return k.value
}

// Validity returns how long holding the lock remains safe: what is left of
// TTL - drift, counted from the start of the acquiring (or last extending)
// round. It is zero once the lock is released or lost; after the lock
// ended at risk (ErrLockAtRisk), it is the time left to stop. Do not start
// work on the protected resource that may outlast it.
func (k *Lock) Validity() time.Duration {
	if k == nil || k.locker == nil {
		return 0
	}
	k.mu.Lock()
	deadline, state := k.deadline, k.state
	k.mu.Unlock()
	if state != stateHeld && state != stateAtRisk {
		return 0
	}
	return max(0, deadline.Sub(k.locker.o.clock.Now()))
}

// Token returns the lock's fencing token when the Locker has fencing on
// (WithFencing), and 0 otherwise; a leader's lock (Campaign) always has
// one, its term. It is larger than the token of every
// acquisition of the same key (and key prefix) that completed before this
// one began, through any Locker over the same nodes; tokens are not
// consecutive. Send it with every write to the protected storage, and
// have the storage refuse a token lower than the highest it has seen. It
// assumes the nodes keep their counters (persistence) and that no one else
// writes them: see docs/fencing.md.
func (k *Lock) Token() int64 {
	if k == nil || k.locker == nil {
		return 0
	}
	return k.token
}

// Done returns a channel that is closed when the lock ends: released,
// found lost by an extension, at risk, or past its validity. Err then says
// why.
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
			k.startTimerLocked()
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
// its validity ran out (also matching ErrValidityExpired). Once an
// extension has failed, the lock ends earlier, at risk, when less than
// the at-risk margin of validity is left (WithAtRiskMargin): the cause
// then matches ErrLockAtRisk and ErrLockLost, and ErrUnavailable with the
// last failed extension, or ErrMaxHold when the keep-alive stopped at the
// maximum hold time. A kept lock whose extensions succeed never ends so.
func (k *Lock) Err() error {
	if k == nil || k.locker == nil {
		return fmt.Errorf("quorumlock: nil lock: %w", ErrNotHeld)
	}
	k.mu.Lock()
	if s, cause := k.endLocked(k.locker.o.clock.Now()); cause != nil {
		k.mu.Unlock()
		k.finish(s, cause)
		k.mu.Lock()
	}
	cause := k.cause
	k.mu.Unlock()
	return cause
}

// Context returns a copy of parent that is cancelled when the lock ends,
// with Err as its cause (context.Cause), and a function that detaches it
// from the lock and cancels it. Call the function when done with the
// context, as with context.WithCancel. When extensions fail, the lock ends
// at risk (ErrLockAtRisk) with the at-risk margin of validity left: the
// time to stop using the resource.
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
	k.startTimerLocked()
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

// startTimerLocked starts the timer of the lock's end if none runs;
// k.mu is held.
func (k *Lock) startTimerLocked() {
	if k.timer != nil || k.state != stateHeld {
		return
	}
	k.gen++
	gen := k.gen
	k.timer = k.locker.o.clock.AfterFunc(k.endsLocked().Sub(k.locker.o.clock.Now()), func() { k.timerFired(gen) })
}

// moveTimerLocked moves a running timer to the lock's end, which a failed
// extension or the maximum hold time brought forward; k.mu is held.
func (k *Lock) moveTimerLocked() {
	if k.timer == nil {
		return // no one watches: Err finds the end when asked
	}
	k.timer.Stop()
	k.timer = nil
	k.startTimerLocked()
}

// atRiskLocked reports whether the lock ends at risk, before its validity
// runs out: its last extension failed, or the keep-alive stopped at the
// maximum hold time. k.mu is held.
func (k *Lock) atRiskLocked() bool { return k.keptErr != nil || k.capped }

// endsLocked is when the held lock ends unless an extension succeeds
// first: at its deadline, or the at-risk margin before it. k.mu is held.
func (k *Lock) endsLocked() time.Time {
	if k.atRiskLocked() {
		return k.deadline.Add(-k.locker.o.atRisk)
	}
	return k.deadline
}

// endLocked returns the state and cause with which the held lock ends at
// now, or a nil cause while it goes on. k.mu is held.
func (k *Lock) endLocked(now time.Time) (lockState, error) {
	switch {
	case k.state != stateHeld:
		return k.state, nil
	case !now.Before(k.deadline):
		return stateLost, k.expiredCauseLocked()
	case k.atRiskLocked() && !now.Before(k.endsLocked()):
		return stateAtRisk, k.atRiskCauseLocked(now)
	}
	return stateHeld, nil
}

// timerFired ends the lock when its end has come, and otherwise (an
// extension moved it) arms the timer again. A stale timer (gen) does
// nothing.
func (k *Lock) timerFired(gen uint64) {
	k.mu.Lock()
	if gen != k.gen {
		k.mu.Unlock()
		return
	}
	k.timer = nil
	s, cause := k.endLocked(k.locker.o.clock.Now())
	if cause == nil {
		k.startTimerLocked()
		k.mu.Unlock()
		return
	}
	k.mu.Unlock()
	k.finish(s, cause)
}

// extensionFailed notes an extension that did not reach a quorum (qe's
// Reason is ErrUnavailable): from now, the lock ends at risk, the at-risk
// margin before its validity does, unless an extension succeeds first.
// The caller's context error stays out of the lock's cause.
func (k *Lock) extensionFailed(qe *QuorumError) {
	failed := *qe
	failed.Context = nil
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state == stateHeld {
		k.keptErr = &failed
		k.moveTimerLocked()
	}
}

// atRiskCauseLocked is the cause of a lock at risk at now; k.mu is held.
func (k *Lock) atRiskCauseLocked(now time.Time) error {
	e := &atRiskError{key: k.key, left: k.deadline.Sub(now), margin: k.locker.o.atRisk, why: k.keptErr}
	if k.capped {
		e.why, e.maxHold = ErrMaxHold, k.locker.o.maxHold
	}
	return e
}

// atRiskError is the cause of a lock that ended at risk: it matches
// ErrLockAtRisk, ErrLockLost, and why: the last failed extension's
// *QuorumError, or ErrMaxHold.
type atRiskError struct {
	key          string
	left, margin time.Duration
	why          error
	maxHold      time.Duration
}

func (e *atRiskError) Error() string {
	var b strings.Builder
	b.WriteString("quorumlock: lock ")
	b.WriteString(strconv.Quote(e.key))
	b.WriteString(" at risk: ")
	if e.why == ErrMaxHold {
		fmt.Fprintf(&b, "the keep-alive stopped at the maximum hold time (%v)", e.maxHold)
	} else {
		b.WriteString("its extensions have not reached a quorum")
	}
	fmt.Fprintf(&b, ", and %v of validity is left (at-risk margin %v): stop using it", e.left.Round(time.Millisecond), e.margin)
	if e.why != ErrMaxHold && e.why != nil {
		b.WriteString("; last extension: ")
		b.WriteString(strings.TrimPrefix(e.why.Error(), "quorumlock: "))
	}
	return b.String()
}

func (e *atRiskError) Unwrap() []error {
	if e.why == nil {
		return []error{ErrLockAtRisk, ErrLockLost}
	}
	return []error{ErrLockAtRisk, ErrLockLost, e.why}
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

// finish ends the lock with state s and cause: it closes Done, runs the
// hooks and leaves the keeper. A lock at risk keeps its deadline (Validity:
// the time left to stop). A lost lock may still become released; the
// first cause stays.
func (k *Lock) finish(s lockState, cause error) {
	k.mu.Lock()
	if k.state != stateHeld {
		if s == stateReleased {
			k.state, k.deadline = s, time.Time{}
		}
		k.mu.Unlock()
		return
	}
	k.state, k.cause = s, cause
	if s != stateAtRisk {
		k.deadline = time.Time{}
	}
	if k.kept {
		k.mu.Unlock()
		// After the state (the keeper adds only held locks), before Done:
		// a holder woken by Done finds the lock no longer kept alive.
		k.locker.keeper.drop(k)
		k.mu.Lock()
	}
	switch k.done { // Done may have made it closed in the gap above
	case nil:
		k.done = closedChan
	case closedChan:
	default:
		close(k.done)
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
	if obs := k.locker.obs; obs != nil && s != stateReleased {
		obs.Observe(context.Background(), Event{Kind: OpLost, Key: k.key, Lock: kindName(k.kind), Start: k.locker.o.clock.Now(), Err: cause})
	}
}

// releasedError is the cause of a released lock, formatted only if asked.
type releasedError struct{ key string }

func (e *releasedError) Error() string {
	return "quorumlock: lock " + strconv.Quote(e.key) + ": released"
}
func (e *releasedError) Unwrap() error { return ErrReleased }

// lose ends the lock after an extension found it gone.
func (k *Lock) lose(qe *QuorumError) { k.finish(stateLost, &lostError{qe}) }

// lostError is the cause of a lock an extension found gone: it matches
// ErrLockLost and the extension's error, and says "lost" once.
type lostError struct{ qe *QuorumError }

func (e *lostError) Error() string {
	return "quorumlock: lock " + strconv.Quote(e.qe.Key) + " lost: " + strings.TrimPrefix(e.qe.Error(), "quorumlock: ")
}

func (e *lostError) Unwrap() []error { return []error{ErrLockLost, e.qe} }

// register records a newly acquired lock so that Close can release it.
func (l *Locker) register(lock *Lock) (*Lock, error) {
	l.mu.Lock()
	if !l.closed {
		l.held[lock] = struct{}{}
		l.mu.Unlock()
		return lock, nil
	}
	l.mu.Unlock()
	err := lock.release(context.Background())
	return nil, errors.Join(l.closedError(OpAcquire, lock.key), err)
}

func (l *Locker) unregister(lock *Lock) {
	l.mu.Lock()
	delete(l.held, lock)
	l.mu.Unlock()
}

// Release deletes the lock on every node that still holds this lock's
// value, whatever the strategy. It runs even if ctx has already ended,
// bounded by one node timeout: a suspect node is asked in the background,
// or, if a call to it still runs, owed the release, which it is sent
// after its next answer (docs/design.md, node health). It stops the
// keep-alive first, and ends its goroutine if this was its last lock.
//
// It returns nil when a quorum deleted the lock, and otherwise a
// *QuorumError: ErrNotHeld when too few nodes still held it (it had
// expired or been taken over), ErrUnavailable when node failures leave
// that unknown. A Release that nodes' failures kept from a quorum can be
// called again (Close does too): it asks only the nodes that failed, and
// returns nil once all have answered (docs/design.md, releasing again).
// Once a quorum deleted the lock, or no node is left to ask, it returns nil
// at once; one still to be retried returns ErrClosed after Close.
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
	if again { // a retry asks the nodes: Close waits for it
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
		ctx = l.begin(ctx, OpRelease, k.key)
		start = l.o.clock.Now()
	}
	if state != stateReleased { // no renewal may follow the release
		k.relErr.key = k.key
		k.finish(stateReleased, &k.relErr)
		k.mu.Lock()
		kept := k.kept // final: the keeper adds only held locks
		k.mu.Unlock()
		if kept {
			l.keeper.waitIdle()
		}
	}
	results, handed := l.releaseAll(detached(ctx), k.kind, k.value, false, true, prev, k.skipped)
	if handed {
		l.handedOver(k.kind.stored())
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
		err = nil // a node that failed before may have deleted it then
	}
	if l.obs != nil {
		l.obs.Observe(ctx, Event{Kind: OpRelease, Key: k.key, Lock: kindName(k.kind), Start: start, Duration: l.o.clock.Now().Sub(start), Err: err, Nodes: results})
	}
	return err
}

// retryable reports whether a release round left the outcome open: no
// quorum deleted the lock, and some node did not answer that is not
// suspect (a suspect node's release runs in the background, or is owed).
// A node never sent the acquisition (not tried) has nothing to release.
func retryable(results []NodeResult, q int) bool {
	ok, _, _ := tally(results)
	if ok >= q {
		return false
	}
	for i := range results {
		r := &results[i]
		if (r.Outcome == OutcomeFailed || r.Outcome == OutcomeCanceled) && !errors.Is(r.Err, ErrNodeSuspect) {
			return true
		}
	}
	return false
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

// Hold keeps the lock alive for a holder about to work under it. It
// returns a context derived from parent that ends when the lock ends (its
// cause is Err) or the Locker is closing (a cause matching ErrClosed), and
// an idempotent done function to call after Release. Until done, Close and
// Shutdown wait instead of releasing the lock. Use it where Locker.Do does
// not fit.
//
// Hold returns KeepAlive's errors, ErrInvalidArgument for a nil parent, and
// ErrClosed once the Locker is closing.
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
// succeeds only if a quorum did so before the current validity ran out.
// The new validity counts from the start of the extending round.
//
// A failed Extend returns a *QuorumError. ErrLockLost and
// ErrValidityExpired mean the lock is gone: stop using the resource; Done
// is closed. ErrUnavailable means too many nodes failed to answer; the lock
// stays valid for what remains of Validity, and Extend may be tried again
// until the lock ends at risk, the at-risk margin before its validity
// (Err).
// Extending a released lock returns ErrNotHeld, after the Locker's Close
// ErrClosed, and with a nil ctx ErrInvalidArgument.
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
	deadline, state := k.atRiskNoted()
	switch {
	case state == stateReleased && l.isClosed():
		return l.closedError(OpExtend, k.key)
	case state == stateReleased:
		return fmt.Errorf("quorumlock: extend %q: already released: %w", k.key, ErrNotHeld)
	case state == stateLost:
		return fmt.Errorf("quorumlock: extend %q: %w", k.key, ErrLockLost)
	case state == stateAtRisk:
		return fmt.Errorf("quorumlock: extend %q: %w", k.key, k.Err())
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

	if l.obs != nil {
		ctx = l.begin(ctx, OpExtend, k.key)
	}
	extend := k.kind.extend(k.value)
	results := l.askNodes(ctx, l.o.strategy, func(ctx context.Context, i int) (bool, error) {
		return l.requestVote(ctx, i, &extend)
	})
	if qe := k.settleExtend(ctx, start, l.o.clock.Now(), deadline, results); qe != nil {
		if errors.Is(qe.Reason, ErrUnavailable) {
			k.extensionFailed(qe)
		}
		return qe
	}
	return nil
}

// atRiskNoted ends the lock if it is at risk by now and no timer has said
// so yet, so that no extension rescues a lock after its at-risk time, and
// returns its deadline and state.
func (k *Lock) atRiskNoted() (time.Time, lockState) {
	k.mu.Lock()
	if s, cause := k.endLocked(k.locker.o.clock.Now()); s == stateAtRisk {
		k.mu.Unlock()
		k.finish(s, cause)
		k.mu.Lock()
	}
	defer k.mu.Unlock()
	return k.deadline, k.state
}

// settleExtend applies an extending round from start to end, the
// validity ending at deadline, and reports it to the Observer. It returns
// nil or a *QuorumError: ErrValidityExpired or ErrLockLost (the lock has
// ended) or ErrUnavailable (still valid until deadline).
func (k *Lock) settleExtend(ctx context.Context, start, end, deadline time.Time, results []NodeResult) *QuorumError {
	qe := k.settle(start, end, deadline, results, contextError(ctx))
	if obs := k.locker.obs; obs != nil {
		e := Event{Kind: OpExtend, Key: k.key, Lock: kindName(k.kind), Start: start, Duration: end.Sub(start), Nodes: results}
		if qe != nil {
			e.Err = qe
		} else {
			e.Validity = k.Validity()
		}
		obs.Observe(ctx, e)
	}
	return qe
}

// settle applies the round; cut is the caller's context error, if it
// ended. The error is complete before it is published (a lost lock's
// cause, the Observer's event): it is never written after.
func (k *Lock) settle(start, end, deadline time.Time, results []NodeResult, cut error) *QuorumError {
	l := k.locker
	newDeadline := start.Add(l.o.ttl - l.o.drift())
	ok, refused, failed := tally(results)
	q := l.o.quorum
	// A quorum within the old validity, and validity left (docs/design.md).
	if ok >= q && end.Before(deadline) && end.Before(newDeadline) {
		k.mu.Lock()
		if k.state == stateHeld {
			k.deadline = newDeadline
			k.keptErr = nil
		}
		k.mu.Unlock()
		return nil
	}
	qe := &QuorumError{Op: OpExtend, Key: k.key, Quorum: q, Nodes: results, Validity: newDeadline.Sub(end), Context: cut}
	switch {
	case ok >= q: // too late: another owner may have taken it in between
		qe.Reason = ErrValidityExpired
		qe.Validity = min(deadline.Sub(end), newDeadline.Sub(end))
		k.lose(qe)
	case refused > len(l.nodes)-q:
		qe.Reason = ErrLockLost
		k.lose(qe)
	case cut == nil || failed > len(l.nodes)-q:
		qe.Reason = ErrUnavailable
	default: // cut short by the caller: outcome unknown
	}
	return qe
}
