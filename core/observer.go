package core

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Observer sees what a Locker does: every acquisition, extension (by
// Extend or the keep-alive), release, loss of a held lock, and wait for
// young nodes, with its key, outcome, timing and per-node results (see
// docs/observability.md). Observe is called synchronously on the goroutine
// that did the work, after it, so it must be quick, safe for concurrent
// use, and must not call back into the Locker or the Lock.
//
// An Observer that also has the method
//
//	Start(ctx context.Context, op Op, key string) context.Context
//
// gets it called when an Acquire, TryAcquire, Extend or Release begins; the
// operation's node calls and its Observe get the context it returns (so a
// span started there parents the driver's spans). Keep-alive extensions,
// losses and waits have no Start.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// Op names what a Locker did: the Kind of an Event and the Op of a
// QuorumError. Its value is the word metrics, logs and spans use.
type Op string

// The operations. Events have every one but OpInspect; a QuorumError has
// OpAcquire, OpExtend, OpRelease or OpInspect.
const (
	// OpAcquire is an Acquire or TryAcquire call, from its start to its
	// return.
	OpAcquire Op = "acquire"
	// OpExtend is one extending round, by Extend or the keep-alive.
	OpExtend Op = "extend"
	// OpRelease is a Release that asked the nodes (a second Release of the
	// same lock is not reported).
	OpRelease Op = "release"
	// OpInspect is Locker.Inspect (and Leader, Observe), which only read.
	OpInspect Op = "inspect"
	// OpLost is a held lock that ended without a Release: an extension
	// found it gone, it was at risk (ErrLockAtRisk), or its validity ran
	// out. The Event's Err is the cause, as Lock.Err returns it.
	OpLost Op = "lost"
	// OpWait is an Acquire about to wait for nodes the restart guard keeps
	// from voting: the Event's Duration is the wait, Err and Nodes the
	// round that found them (matching ErrNodeRestarted).
	OpWait Op = "wait"
)

// String returns the word: "acquire", "extend", "release", "inspect",
// "lost" or "wait".
func (o Op) String() string { return string(o) }

// Event is one thing a Locker did, as its Observer sees it.
type Event struct {
	Kind Op
	// Key is the lock's key as the user gave it (without the key prefix):
	// a multi-key lock's keys joined by commas, as Lock.Key returns them.
	Key string
	// Lock is the kind of lock: "mutex" (Acquire, TryAcquire, Do),
	// "multi" (AcquireAll, TryAcquireAll), "shared" (AcquireShared,
	// TryAcquireShared), "semaphore" (AcquirePermit, TryAcquirePermit)
	// or "leader" (Campaign).
	Lock string
	// Start is when the operation began (when the loss was noticed, for
	// OpLost); Duration how long it took (zero for OpLost).
	Start    time.Time
	Duration time.Duration
	// Err is nil on success, or the error the operation returned (the
	// cause, for OpLost). Reason(Err) names it in one word.
	Err error
	// Nodes holds each node's result in the last round the operation made
	// (nil when it asked no node). Observers must not keep or change it.
	Nodes []NodeResult
	// Tries is the number of rounds an acquisition made.
	Tries int
	// Token is the fencing token of an acquired lock (WithFencing), else 0.
	Token int64
	// Validity is how long holding the lock stays safe after a successful
	// acquisition or extension.
	Validity time.Duration
}

// The reasons Reason returns.
const (
	ReasonOK          = "ok"
	ReasonContended   = "contended"
	ReasonUnavailable = "unavailable"
	ReasonRestarted   = "restarted"
	ReasonExpired     = "expired"
	ReasonLost        = "lost"
	ReasonNotHeld     = "not_held"
	ReasonCanceled    = "canceled"
	ReasonClosed      = "closed"
	ReasonInvalid     = "invalid"
	ReasonOther       = "other"
)

// Reason names the outcome of an operation in one word, for a metric label
// or a log field: ReasonOK for nil, ReasonLost for a lost or at-risk lock
// (even joined with its context's end), ReasonCanceled when the caller's
// context ended, else from the sentinel errors (ErrNotAcquired is
// ReasonContended).
func Reason(err error) string {
	switch {
	case err == nil:
		return ReasonOK
	case errors.Is(err, ErrLockLost):
		// Before the context's end: a Do function stopped by a lost or
		// at-risk lock returns its context's error, joined with the cause.
		return ReasonLost
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ReasonCanceled
	case errors.Is(err, ErrClosed):
		return ReasonClosed
	case errors.Is(err, ErrInvalidArgument):
		return ReasonInvalid
	case errors.Is(err, ErrNotHeld):
		return ReasonNotHeld
	case errors.Is(err, ErrValidityExpired):
		return ReasonExpired
	case errors.Is(err, ErrUnavailable):
		return ReasonUnavailable
	case errors.Is(err, ErrNotAcquired):
		return ReasonContended
	case errors.Is(err, ErrNodeRestarted):
		return ReasonRestarted
	default:
		return ReasonOther
	}
}

// starter is an Observer's optional start hook (see Observer).
type starter interface {
	Start(ctx context.Context, op Op, key string) context.Context
}

// observers fans events out to several Observers, in order.
type observers []Observer

func (os observers) Observe(ctx context.Context, e Event) {
	for _, o := range os {
		o.Observe(ctx, e)
	}
}

// observing returns what New keeps of the Observers given: one Observer
// that reports to them all, in order (nil for none), and their start
// hooks, found once here rather than at every operation.
func observing(given []Observer) (Observer, []starter) {
	var hooks []starter
	for _, o := range given {
		if s, ok := o.(starter); ok {
			hooks = append(hooks, s)
		}
	}
	switch len(given) {
	case 0:
		return nil, nil
	case 1:
		return given[0], hooks
	}
	return observers(slices.Clone(given)), hooks
}

// begin runs the start hooks as an operation op on key begins, and
// returns the context the operation goes on with: each hook gets the one
// the hook before returned (nil keeps it). A nil ctx, which the operation
// refuses, starts nothing.
func (l *Locker) begin(ctx context.Context, op Op, key string) context.Context {
	if ctx == nil {
		return ctx
	}
	for _, s := range l.hooks {
		if c := s.Start(ctx, op, key); c != nil {
			ctx = c
		}
	}
	return ctx
}

// The kinds of lock, as Event.Lock names them.
const (
	lockMutex  = "mutex"
	lockMulti  = "multi"
	lockShared = "shared"
	// lockSemaphore names a permit of a semaphore (semaphore.go).
	lockSemaphore = "semaphore"
)

// lockName names the kind of lock t takes, as kindName names a lockKind.
func (t target) lockName() string {
	switch {
	case t.set != nil:
		return lockMulti
	case t.shared:
		return lockShared
	case t.sem:
		return lockSemaphore
	case t.candidate != "":
		return lockLeader
	}
	return lockMutex
}

// observeAcquire reports an acquisition that began at start.
func (l *Locker) observeAcquire(ctx context.Context, t target, start time.Time, lock *Lock, err error) {
	e := Event{Kind: OpAcquire, Key: t.key, Lock: t.lockName(), Start: start, Duration: l.o.clock.Now().Sub(start), Err: err}
	if lock != nil {
		e.Nodes, e.Tries, e.Token, e.Validity = lock.nodes, lock.tries, lock.token, lock.Validity()
	} else if qe := (*QuorumError)(nil); errors.As(err, &qe) {
		e.Nodes, e.Tries = qe.Nodes, qe.Tries
	}
	if ctx == nil {
		ctx = context.Background()
	}
	l.obs.Observe(ctx, e)
}
