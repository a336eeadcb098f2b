package core

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// The error categories. Every error of this package matches one of them with
// errors.Is; those that come from a round of node calls are also a
// *QuorumError with each node's outcome.
var (
	// ErrNotAcquired: the lock is held by someone else (or the caller's
	// context ended first): enough nodes answered, but not enough said yes.
	ErrNotAcquired = errors.New("quorumlock: lock held by another owner")
	// ErrUnavailable: too many nodes failed or timed out for a quorum to be
	// possible; an outage, not contention.
	ErrUnavailable = errors.New("quorumlock: too many nodes unavailable for a quorum")
	// ErrNodeSuspect: a node's result when the round did not ask it, because
	// a call to it timed out or could not connect lately. Rounds ask it again
	// once a probe finds it answering (Stats.Suspect lists such nodes).
	ErrNodeSuspect = errors.New("quorumlock: node suspect")
	// ErrValidityExpired: a quorum answered, but the round took so long that
	// no validity was left (TTL - elapsed - drift <= 0). The lock is not
	// safe to use and, after a failed extension, is gone.
	ErrValidityExpired = errors.New("quorumlock: no validity left")
	// ErrLockLost: an extension found the lock no longer held on enough
	// nodes (it expired, or was deleted or taken over). The lock is gone.
	ErrLockLost = errors.New("quorumlock: lock lost")
	// ErrLockAtRisk: the lock is about to be lost: an extension failed, or
	// the keep-alive stopped at the maximum hold time, and less than the
	// at-risk margin of validity is left (WithAtRiskMargin). The lock has
	// ended then (Done, Err, Context): stop using the resource, and
	// release the lock; it stays valid for what Validity says. A cause
	// matching it matches ErrLockLost too.
	ErrLockAtRisk = errors.New("quorumlock: lock at risk")
	// ErrNotHeld: the lock was already released, or a release found it was
	// no longer held on a quorum, or the *Lock is nil.
	ErrNotHeld = errors.New("quorumlock: lock not held")
	// ErrInvalidArgument: bad input, such as an empty key or an impossible
	// quorum. Retrying cannot help.
	ErrInvalidArgument = driver.ErrInvalidArgument
	// ErrClosed: the Locker was closed.
	ErrClosed = errors.New("quorumlock: locker closed")
	// ErrReleased: the lock was released, by Release or by the Locker's
	// Close. It is the cause that Lock.Err and a Lock.Context report then.
	ErrReleased = errors.New("quorumlock: lock released")
	// ErrMaxHold: the keep-alive machinery stopped extending the lock
	// because the maximum hold time (WithMaxHold) had passed; it is found
	// in the cause of a lock lost that way, beside ErrLockLost.
	ErrMaxHold = errors.New("quorumlock: maximum hold time reached")
	// ErrNodeTimeout: a node did not answer within the node timeout. It is
	// found inside a QuorumError's node outcomes.
	ErrNodeTimeout = errors.New("quorumlock: node timeout")
	// ErrNodeRestarted: the restart guard kept a node from voting, its data
	// being younger than the guard's max TTL. It is such a node's outcome,
	// and the Reason of an acquisition they left without a quorum (Acquire
	// waits for them, so only once its context ends; TryAcquire at once).
	ErrNodeRestarted = errors.New("quorumlock: node restarted recently")
	// ErrDuplicateNode: a node did not vote because its server already
	// votes under another node's name. It is found inside a QuorumError's
	// node outcomes, with the names of both nodes.
	ErrDuplicateNode = errors.New("quorumlock: node is the same server as another")
)

// restartGuardError is a young node's outcome error: its data is Age old
// and it votes from MinAge. It matches ErrNodeRestarted.
type restartGuardError struct {
	Age    time.Duration
	MinAge time.Duration
}

func (e *restartGuardError) Error() string {
	return "quorumlock: node restarted recently (restart guard): data " + e.Age.String() +
		" old, votes in " + (e.MinAge - e.Age).String() + " (at " + e.MinAge.String() + ")"
}

// Unwrap returns ErrNodeRestarted.
func (e *restartGuardError) Unwrap() error { return ErrNodeRestarted }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// Outcome is what one node did in one round.
type Outcome uint8

const (
	// OutcomeNotTried: the strategy never asked this node, or (a release)
	// the lock's acquisition never sent it the key: nothing to release.
	OutcomeNotTried Outcome = iota
	// OutcomeOK: the node did what was asked (set, extended or deleted our key).
	OutcomeOK
	// OutcomeRefused: the node answered no: the key is held by another value
	// (acquire) or is not ours any more (extend, release).
	OutcomeRefused
	// OutcomeFailed: the node returned an error or did not answer in time.
	OutcomeFailed
	// OutcomeCanceled: the caller's context or the strategy cut the call off
	// before the node answered. It does not count as a node failure.
	OutcomeCanceled
)

// String returns "not-tried", "ok", "refused", "failed" or "canceled".
func (o Outcome) String() string {
	switch o {
	case OutcomeNotTried:
		return "not-tried"
	case OutcomeOK:
		return "ok"
	case OutcomeRefused:
		return "refused"
	case OutcomeFailed:
		return "failed"
	case OutcomeCanceled:
		return "canceled"
	default:
		return "outcome(" + itoa(int(o)) + ")"
	}
}

// NodeResult is one node's part in a round.
type NodeResult struct {
	Index   int           // position of the node in the Locker's list
	Node    string        // the node's String()
	Outcome Outcome       // what it did
	Err     error         // the node's error, for OutcomeFailed
	Latency time.Duration // time from the call to the node's answer
}

// QuorumError reports a round that did not reach its goal: which operation,
// on which key, and what each node did. Match it with errors.As, and its
// category with errors.Is (Reason); when the caller's context ended it also
// matches context.Canceled or context.DeadlineExceeded.
type QuorumError struct {
	Op     Op
	Key    string
	Quorum int
	// Reason is the category: ErrNotAcquired, ErrUnavailable,
	// ErrNodeRestarted, ErrValidityExpired, ErrLockLost or ErrNotHeld; nil
	// when the caller's context ended an extension before its outcome.
	Reason error
	// Context is the caller's context error (with its cause, when one was
	// given) if the context ended during the operation, else nil.
	Context error
	// Nodes holds every node's outcome in the last round, in node order;
	// after leader rounds that did not settle a split vote, in the round
	// that split (docs/design.md, split votes).
	Nodes []NodeResult
	// Tries is the number of rounds Acquire made (0 for other operations).
	Tries int
	// Validity is what remained of the TTL at the end of the round
	// (TTL - elapsed - drift): at most zero for ErrValidityExpired.
	Validity time.Duration
}

// Counts tallies the nodes by outcome.
func (e *QuorumError) Counts() (ok, refused, failed int) { return tally(e.Nodes) }

// Error describes the failure and every node's outcome on one line.
func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString("quorumlock: ")
	b.WriteString(string(e.Op))
	b.WriteString(" ")
	b.WriteString(strconv.Quote(e.Key))
	b.WriteString(": ")
	switch {
	case e.Reason != nil:
		b.WriteString(strings.TrimPrefix(e.Reason.Error(), "quorumlock: "))
	case e.Context != nil:
		b.WriteString("interrupted")
	}
	if e.Context != nil {
		b.WriteString(" (")
		b.WriteString(e.Context.Error())
		b.WriteString(")")
	}
	ok, refused, failed := e.Counts()
	fmt.Fprintf(&b, ": %d of %d nodes ok, %d refused, %d failed, quorum %d", ok, len(e.Nodes), refused, failed, e.Quorum)
	if e.Tries > 1 {
		fmt.Fprintf(&b, ", after %d tries", e.Tries)
	}
	if errors.Is(e.Reason, ErrValidityExpired) {
		fmt.Fprintf(&b, ", validity %v", e.Validity)
	}
	if e.Reason == ErrNodeRestarted {
		if wait, ok := guardWait(e.Nodes, e.Quorum); ok {
			fmt.Fprintf(&b, ", enough nodes vote %v after the last try", wait)
		}
	}
	b.WriteString(" [")
	for i, n := range e.Nodes {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d %s %s", n.Index, n.Node, n.Outcome)
		if n.Outcome != OutcomeNotTried {
			fmt.Fprintf(&b, " in %v", n.Latency.Round(10*time.Microsecond))
		}
		if n.Err != nil {
			b.WriteString(": ")
			b.WriteString(n.Err.Error())
		}
	}
	b.WriteString("]")
	return b.String()
}

// Unwrap returns the category, the context error and every node's error, so
// that errors.Is and errors.As see all of them.
func (e *QuorumError) Unwrap() []error {
	errs := make([]error, 0, 2+len(e.Nodes))
	if e.Reason != nil {
		errs = append(errs, e.Reason)
	}
	if e.Context != nil {
		errs = append(errs, e.Context)
	}
	for _, n := range e.Nodes {
		if n.Err != nil {
			errs = append(errs, n.Err)
		}
	}
	return errs
}

func itoa(n int) string { return strconv.Itoa(n) }

// nodeTimeoutError is a node call cut off by the node timeout. It hides
// context errors, so that context.DeadlineExceeded is the caller's own.
type nodeTimeoutError struct {
	after time.Duration
	err   error // the driver's error, if it was not a context error
}

func (e *nodeTimeoutError) Error() string {
	if e.err == nil {
		return "no answer within the node timeout of " + e.after.String()
	}
	return "no answer within the node timeout of " + e.after.String() + ": " + e.err.Error()
}

func (e *nodeTimeoutError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrNodeTimeout}
	}
	return []error{ErrNodeTimeout, e.err}
}

// errNoNodeAsked is the reason of an Acquire whose context ended before it
// asked any node. It matches ErrNotAcquired.
var errNoNodeAsked error = noNodeAsked{}

type noNodeAsked struct{}

func (noNodeAsked) Error() string        { return "quorumlock: not acquired: no node was asked" }
func (noNodeAsked) Is(target error) bool { return target == ErrNotAcquired }
