package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is the identity check: one server, one vote. A node's yes
// counts only once its server has said who it is (ScriptIdentify), and a
// node whose server already votes under another node's name does not
// vote. Why, and what it cannot see: docs/design.md, one server, one vote.

// duplicateNodeError is the outcome error of a node whose server already
// votes under another node's name. It matches ErrDuplicateNode and
// ErrInvalidArgument.
type duplicateNodeError struct {
	Node     string // the node that does not vote
	Other    string // the node that votes for the server
	Identity string // the server's identity: the value of IdentityKey there
}

func (e *duplicateNodeError) Error() string {
	return "quorumlock: node " + strconv.Quote(e.Node) + " is the same server as node " + strconv.Quote(e.Other) +
		" (identity key " + driver.IdentityKey + " = " + strconv.Quote(e.Identity) + "): one server, one vote; " +
		"its vote does not count: list each server once"
}

// Unwrap returns ErrDuplicateNode and ErrInvalidArgument.
func (e *duplicateNodeError) Unwrap() []error { return []error{ErrDuplicateNode, ErrInvalidArgument} }

// uncheckedError is the outcome error of a node whose new identity could
// not be checked because another node, which may be the same server, did
// not say who it is. The failure is the other node's: the node itself
// answered, and is not suspect for it; it does not vote until a check
// succeeds.
type uncheckedError struct {
	Node, Other, Identity string
	err                   error // the other node's failure
}

func (e *uncheckedError) Error() string {
	return "quorumlock: node " + strconv.Quote(e.Node) + " has a new identity (" + driver.IdentityKey + " = " +
		strconv.Quote(e.Identity) + "), and node " + strconv.Quote(e.Other) +
		", which may be the same server, could not say who it is: " + e.err.Error()
}

// Unwrap returns the other node's failure.
func (e *uncheckedError) Unwrap() error { return e.err }

// othersFailure reports whether err, a node's outcome, is another node's
// failure (an uncheckedError): no sign that the node itself is down.
func othersFailure(err error) bool {
	var ue *uncheckedError
	return errors.As(err, &ue)
}

// A node's state, in the low bits (stateBits) of its identity word; the
// bits above count its failures, in steps of failureOne.
const (
	unverified uint64 = iota
	verified
	duplicate
)

const (
	stateBits  uint64 = 3
	failureOne uint64 = 4
)

// withState returns the identity word s with its state set to state.
func withState(s, state uint64) uint64 { return s&^stateBits | state }

// identity is a Locker's knowledge of which server each node is.
type identity struct {
	// state is each node's identity word; the failure count lets a check
	// that a failure overtook leave the node unverified.
	state []atomic.Uint64

	mu    sync.Mutex
	ids   []string       // per node: the identity registered for it, or ""
	owner map[string]int // each registered identity: its node
}

func newIdentity(nodes int) *identity {
	return &identity{state: make([]atomic.Uint64, nodes), ids: make([]string, nodes), owner: make(map[string]int, nodes)}
}

// precheck returns nil unless node i is a known duplicate that a new
// check still finds one (or the check fails).
func (l *Locker) precheck(ctx context.Context, i int) error {
	if s := l.ident.state[i].Load(); s&stateBits == duplicate {
		return l.identify(ctx, i, s)
	}
	return nil
}

// confirm returns nil when node i may vote yes, checking it if need be.
func (l *Locker) confirm(ctx context.Context, i int) error {
	s := l.ident.state[i].Load()
	if s&stateBits == verified {
		return nil
	}
	return l.identify(ctx, i, s)
}

// identify asks node i, whose identity word was s, who it is and records
// it: verified, or duplicate (a *duplicateNodeError). A new identity is
// first checked against every other verified node. A failed call is
// returned, and node i does not vote: node i's own failure as it is,
// another node's as an *uncheckedError, which blames that node alone.
func (l *Locker) identify(ctx context.Context, i int, s uint64) error {
	id, err := l.askIdentity(ctx, i)
	if err != nil {
		return err
	}
	d := l.ident
	d.mu.Lock()
	_, known := d.owner[id]
	var others []int
	if !known {
		for k := range d.state {
			if k != i && d.state[k].Load()&stateBits == verified {
				others = append(others, k)
			}
		}
	}
	d.mu.Unlock()

	// "" for a cluster whose identity's master did not answer: not node i's.
	found := make([]string, len(l.nodes))
	if len(others) > 0 {
		errs := make([]error, len(l.nodes))
		var wg sync.WaitGroup
		for _, k := range others {
			wg.Go(func() { found[k], errs[k] = l.askOther(ctx, k) })
		}
		wg.Wait()
		for _, k := range others {
			if errs[k] != nil && !l.sharded(k) {
				return &uncheckedError{Node: l.names[i], Other: l.names[k], Identity: id, err: errs[k]}
			}
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range others {
		if found[k] != "" && found[k] != d.ids[k] {
			d.register(k, found[k])
		}
	}
	next := withState(s, verified)
	if j, taken := d.owner[id]; taken && j != i {
		err = &duplicateNodeError{Node: l.names[i], Other: l.names[j], Identity: id}
		next = withState(s, duplicate)
	} else {
		d.register(i, id)
	}
	// Unchanged if a failure was marked meanwhile: the next yes is checked.
	d.state[i].CompareAndSwap(s, next)
	return err
}

// checkContext returns the context of an identity check for a call under
// ctx: cancelled with ctx, but with a node timeout of its own, or a slow
// node would never vote (docs/design.md, its own deadline).
func (l *Locker) checkContext(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.o.nodeTimeout)
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})
	return cctx, func() { stop(); cancel() }
}

// askIdentity runs ScriptIdentify on node i, within checkContext(ctx),
// and returns the identity its server reported.
func (l *Locker) askIdentity(ctx context.Context, i int) (string, error) {
	cctx, cancel := l.checkContext(ctx)
	defer cancel()
	return l.identityIn(cctx, i)
}

// askOther is askIdentity for node k, asked to check another node's new
// identity. A failure is k's own, as any failed call's: k is unverified,
// and suspect if it timed out or could not connect. When ctx was
// cancelled (which cuts the check short; its deadline does not), the
// failure is the caller's, and k is left as it was.
func (l *Locker) askOther(ctx context.Context, k int) (string, error) {
	cctx, cancel := l.checkContext(ctx)
	defer cancel()
	id, err := l.identityIn(cctx, k)
	if err == nil || l.sharded(k) || errors.Is(ctx.Err(), context.Canceled) {
		return id, err
	}
	l.unverify(k)
	// Classified as any call's failure: a timeout or a lost connection
	// makes k suspect.
	_, err = l.outcome(k, false, err, false, cctx.Err() != nil || deadlinePassed(cctx), l.o.nodeTimeout)
	return "", err
}

// identityIn runs ScriptIdentify on node i under ctx and returns the
// identity its server reported.
func (l *Locker) identityIn(ctx context.Context, i int) (string, error) {
	reply, err := l.eval(ctx, i, driver.ScriptIdentify, []string{driver.IdentityKey}, []string{newValue()})
	if err != nil {
		return "", err
	}
	id, ok := reply.(string)
	if !ok || id == "" {
		return "", fmt.Errorf("quorumlock: unexpected reply %#v to the %s script", reply, driver.ScriptIdentify.Name())
	}
	return id, nil
}

// register records id as node k's identity; d.mu is held. When another
// node has id, k is marked unverified instead: its next yes finds it a
// duplicate.
func (d *identity) register(k int, id string) {
	if j, taken := d.owner[id]; taken && j != k {
		for {
			s := d.state[k].Load()
			if s&stateBits != verified || d.state[k].CompareAndSwap(s, withState(s, unverified)) {
				return
			}
		}
	}
	if old := d.ids[k]; old != "" && d.owner[old] == k {
		delete(d.owner, old)
	}
	d.ids[k], d.owner[id] = id, k
}

// unverify marks a failure of node i: a verified node's next yes is
// checked first. A sharded node stays as it is (docs/design.md, Redis
// Cluster).
func (l *Locker) unverify(i int) {
	if l.sharded(i) {
		return
	}
	st := &l.ident.state[i]
	for {
		s := st.Load()
		next := s + failureOne
		if s&stateBits == verified {
			next = withState(next, unverified)
		}
		if st.CompareAndSwap(s, next) {
			return
		}
	}
}

// confirmAll is checkedCall's ending for a batch of calls to node i: yeses
// count only once confirm allows them, else each fails with its error.
func (l *Locker) confirmAll(ctx context.Context, i int, answers []answer) {
	var failed, yes bool
	for _, v := range answers {
		failed = failed || v.err != nil
		yes = yes || v.ok && v.err == nil
	}
	if failed {
		l.unverify(i)
	}
	if !yes {
		return
	}
	if err := l.confirm(ctx, i); err != nil {
		for k := range answers {
			if answers[k].ok && answers[k].err == nil {
				answers[k] = answer{err: err}
			}
		}
	}
}

// sharded reports whether node i spreads its keys over several servers.
func (l *Locker) sharded(i int) bool {
	s, ok := l.nodes[i].(driver.Sharded)
	return ok && s.Sharded()
}

// duplicates returns the names of the nodes known to be the same server
// as another, in node order.
func (l *Locker) duplicates() []string {
	var out []string
	for i := range l.ident.state {
		if l.ident.state[i].Load()&stateBits == duplicate {
			out = append(out, l.names[i])
		}
	}
	return out
}
