package safety

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quorumlock/quorumlock/core"
)

// Outcome is how an operation ended, as its caller saw it.
type Outcome string

// The outcomes of an operation.
const (
	// OK: the operation took effect.
	OK Outcome = "ok"
	// Failed: the operation did not take effect (a refusal, a lost lock).
	Failed Outcome = "failed"
	// Unknown: the operation may or may not have taken effect (a timeout,
	// nodes that did not answer).
	Unknown Outcome = "unknown"
)

// OutcomeOf classifies the error of a lock operation: nil is OK; the end
// of the caller's context and ErrUnavailable (nodes that did not answer,
// whose replies may have been lost) are Unknown; anything else is Failed.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, core.ErrUnavailable):
		return Unknown
	}
	return Failed
}

// LockOpKind names an operation on a lock.
type LockOpKind string

// The operations on a lock.
const (
	Acquire LockOpKind = "acquire"
	Extend  LockOpKind = "extend"
	Release LockOpKind = "release"
)

// LockOp is one operation of a client on a lock: invoked at Call, answered
// at Return, on the History's clock. A client holds at most one lock at a
// time, so its operations on a key, in order, are an acquire and, when
// that was OK, extends and a release.
type LockOp struct {
	Client int
	Key    string // the lock's name: its keys joined by commas
	// Keys are the keys the lock holds (a multi-key lock's, or Key alone
	// when empty): the operation counts in each key's history.
	Keys    []string
	Shared  bool // a shared (read) lock's; else exclusive
	Permits int  // a semaphore's permit's: its K; else 0
	Kind    LockOpKind
	Call    time.Duration
	Return  time.Duration
	Outcome Outcome
	// ValidUntil, for an OK acquire or extend, is the end of the lock's
	// validity as the client learnt it (the clock read before Validity,
	// so never later than the truth).
	ValidUntil time.Duration
}

func (o LockOp) String() string {
	shared := ""
	switch {
	case o.Shared:
		shared = " shared"
	case o.Permits > 0:
		shared = fmt.Sprintf(" permit of %d", o.Permits)
	}
	s := fmt.Sprintf("client %d %s%s %q [%v, %v] %s", o.Client, o.Kind, shared, o.Key, o.Call, o.Return, o.Outcome)
	if o.Outcome == OK && o.Kind != Release {
		s += fmt.Sprintf(" valid until %v", o.ValidUntil)
	}
	return s
}

// RegisterOp is one read-modify-write, by a holder of Key's lock, of the
// register the lock protects: it read Read (GET, invoked at Call) and wrote
// Wrote (SET, answered at Return). Outcome is OK when the write was
// acknowledged, and Unknown when the write failed and may have been
// applied. A reader's operation (Reader, under a shared lock) writes
// nothing: it read Read at the start of its section and Again at its end.
type RegisterOp struct {
	Client  int
	Key     string
	Call    time.Duration
	Return  time.Duration
	Read    int64
	Wrote   int64
	Outcome Outcome
	Reader  bool
	Again   int64
}

func (o RegisterOp) String() string {
	if o.Reader {
		return fmt.Sprintf("client %d register %q [%v, %v] read %d then %d", o.Client, o.Key, o.Call, o.Return, o.Read, o.Again)
	}
	return fmt.Sprintf("client %d register %q [%v, %v] read %d wrote %d %s", o.Client, o.Key, o.Call, o.Return, o.Read, o.Wrote, o.Outcome)
}

// keysOf is Keys, or Key alone when Keys is empty.
func keysOf(key string, keys []string) []string {
	if len(keys) == 0 {
		return []string{key}
	}
	return keys
}

// AddLockOp records an operation on a lock.
func (h *History) AddLockOp(o LockOp) {
	h.mu.Lock()
	h.lockOps = append(h.lockOps, o)
	h.mu.Unlock()
}

// AddRegisterOp records a read-modify-write of a register.
func (h *History) AddRegisterOp(o RegisterOp) {
	h.mu.Lock()
	h.registerOps = append(h.registerOps, o)
	h.mu.Unlock()
}

// LockOps returns a copy of the lock operations recorded so far.
func (h *History) LockOps() []LockOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.lockOps)
}

// RegisterOps returns a copy of the register operations recorded so far.
func (h *History) RegisterOps() []RegisterOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.registerOps)
}
