package core

import (
	"context"
	"errors"
	"fmt"
	"github.com/quorumlock/quorumlock/core/driver"
	"strconv"
	"sync"
	"sync/atomic"
)

// This file is the identity check: one server, one vote. A node's name is
// the driver's (and "localhost:6379" and "127.0.0.1:6379" are one
// server), so core does not trust it to tell servers apart; it asks each
// server instead. Before a node's yes counts for the first time, core runs
// ScriptIdentify there, which returns the server's identity (IdentityKey,
// written once with a random value). The first node to report an identity
// votes for that server; any other node that reports it is a duplicate:
// that yes is a failure with a *DuplicateNodeError, and from then on each
// of its calls in a round (acquire, extend, release, the keep-alive's
// renewals) checks its identity again instead of running, and fails the
// same way while it is still a duplicate (so a node whose address is
// corrected votes again once it reaches a server of its own).
//
// A failed call marks its node unverified, so that its next yes is checked
// again: the connection the driver dials next may reach another server (a
// DNS change, a failover behind a virtual address). The drivers also
// reconnect to a restarted server without any failed call (go-redis and
// rueidis both do), so a server restarted without persistence has a new
// identity under nodes that were verified: a new identity is therefore
// checked against a fresh answer from every verified node before it
// counts (see identify). What this cannot see is a verified node whose
// address moves, between two calls and without a failure, to a server
// that another node already votes for: that node votes twice until a
// call of the first fails.
//
// A Redis Cluster node's identity is the cluster's: IdentityKey lives on
// the master of its slot. Such a node is not asked again after a failure
// (its failures are often another master's, and one master's outage must
// not silence the others; its client learns the masters from the cluster,
// not from an address that could lead elsewhere), and at its first yes it
// needs that master up.
//
// The check follows the yes rather than preceding the call, so that a call
// goes out whatever the check would find: a release must reach every node
// (Redlock rule 5), and a woken round's leader or a fencing raise answer
// some nodes without calling them. A duplicate's first call only acts on
// the lock's own key, on a server whose vote another node gives.
//
// The cost: a node's first yes, and its first after a failure, waits for
// its identity (one round trip more), and for a node that reports a new
// identity, for the other verified nodes' identities too (one more, in
// parallel): n(n+1)/2 identity calls over a Locker's first round on n
// nodes. A verified node's call costs two atomic loads and nothing else.

// DuplicateNodeError is a node outcome's error when the node is a server
// that already votes under another node's name: both reported the same
// identity (IdentityKey). The node does not vote while that lasts. It
// matches ErrDuplicateNode and ErrInvalidArgument: the node list is
// wrong, and retrying cannot help.
type DuplicateNodeError struct {
	Node     string // the node that does not vote
	Other    string // the node that votes for the server
	Identity string // the server's identity: the value of IdentityKey there
}

func (e *DuplicateNodeError) Error() string {
	return "quorumlock: node " + strconv.Quote(e.Node) + " is the same server as node " + strconv.Quote(e.Other) +
		" (identity key " + driver.IdentityKey + " = " + strconv.Quote(e.Identity) + "): one server, one vote; " +
		"its vote does not count: list each server once"
}

// Unwrap returns ErrDuplicateNode and ErrInvalidArgument.
func (e *DuplicateNodeError) Unwrap() []error { return []error{ErrDuplicateNode, ErrInvalidArgument} }

// The states of a node, in the low bits (stateBits) of its identity word;
// the bits above count the failures marked, in steps of failureOne.
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
	// state holds, per node, its state plus failureOne x the failures
	// marked so far: the count lets a check that a failure overtook leave
	// the node unverified.
	state []atomic.Uint64

	mu    sync.Mutex
	ids   []string       // per node: the identity registered for it, or ""
	owner map[string]int // each registered identity: its node
}

func newIdentity(nodes int) *identity {
	return &identity{state: make([]atomic.Uint64, nodes), ids: make([]string, nodes), owner: make(map[string]int, nodes)}
}

// vote runs call on node i under the identity rule: a known duplicate is
// checked again instead (and the call runs only if it is no longer one),
// a failed call marks the node unverified, and a yes counts only from a
// node whose identity is checked since its last failure.
func (l *Locker) vote(ctx context.Context, i int, call nodeCall) (bool, error) {
	// precheck and confirm, written out: this runs on every node call.
	st := &l.ident.state[i]
	if s := st.Load(); s&stateBits == duplicate {
		if err := l.identify(ctx, i, s); err != nil {
			return false, err
		}
	}
	ok, err := call(ctx, i)
	if err != nil {
		l.unverify(i)
		return ok, err
	}
	if s := st.Load(); ok && s&stateBits != verified {
		if err := l.identify(ctx, i, s); err != nil {
			return false, err
		}
	}
	return ok, nil
}

// precheck returns nil when node i is not a known duplicate; a known
// duplicate's identity is checked again, and its error returned while it
// is still one (or while the check fails).
func (l *Locker) precheck(ctx context.Context, i int) error {
	if s := l.ident.state[i].Load(); s&stateBits == duplicate {
		return l.identify(ctx, i, s)
	}
	return nil
}

// confirm returns nil when node i may vote yes: at once when its identity
// is checked since its last failure, else after checking it.
func (l *Locker) confirm(ctx context.Context, i int) error {
	s := l.ident.state[i].Load()
	if s&stateBits == verified {
		return nil
	}
	return l.identify(ctx, i, s)
}

// identify runs ScriptIdentify on node i, whose identity word was s, and
// records what it found: verified, or duplicate (then its error is a
// *DuplicateNodeError). An identity already registered belongs to its
// node. A new one (a node's first, or one that a server restarted without
// persistence made) is checked against a fresh answer from every other
// verified node first: one of them may have reached the same server since
// it registered (the drivers reconnect after a restart without a failed
// call, so that node was not checked again). A failure of the script, on
// node i or on one of those, is returned as it is, and node i does not
// vote then.
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

	// Each other verified node's identity now, "" for a cluster whose
	// identity's master did not answer: the server that node i reached
	// did, so it is not that one.
	found := make([]string, len(l.nodes))
	if len(others) > 0 {
		errs := make([]error, len(l.nodes))
		var wg sync.WaitGroup
		for _, k := range others {
			wg.Go(func() { found[k], errs[k] = l.askIdentity(ctx, k) })
		}
		wg.Wait()
		for _, k := range others {
			if errs[k] != nil && !l.sharded(k) {
				l.unverify(k) // a failed call, as any other
				return fmt.Errorf("quorumlock: node %s has a new identity (%s = %q), and node %s, which may be the same server, could not say who it is: %w",
					strconv.Quote(l.names[i]), driver.IdentityKey, id, strconv.Quote(l.names[k]), errs[k])
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
		err = &DuplicateNodeError{Node: l.names[i], Other: l.names[j], Identity: id}
		next = withState(s, duplicate)
	} else {
		d.register(i, id)
	}
	// Left as it is if a failure was marked meanwhile: the next yes is
	// checked again.
	d.state[i].CompareAndSwap(s, next)
	return err
}

// checkContext returns the context of an identity call made for a call
// under ctx: cancelled when ctx is (the caller or the strategy gave up on
// the call), but with a node timeout of its own instead of ctx's
// deadline. A check adds one or two round trips to the call's, and with
// round trips near the node timeout the call's deadline would cut it off
// at every call: the node would never vote. So a node's first yes may take
// up to two node timeouts more than a call.
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
	ctx, cancel := l.checkContext(ctx)
	defer cancel()
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

// register records id as node k's identity, in place of the one it had;
// d.mu is held. When another node already has id, k is the same server as
// that node now: it is marked unverified instead, so that its next yes
// finds it a duplicate.
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

// unverify marks a failure of node i: a verified node becomes unverified,
// so that its next yes is checked first. A sharded node (a Redis Cluster)
// stays as it is: its identity lives on the master of IdentityKey's slot,
// its failures are often another master's, and asking again would let one
// master's outage silence the masters that still answer; its client finds
// the masters from the cluster itself, so it does not move to another one.
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

// confirmAll is vote's ending for a batch of calls to node i: a failure
// among votes marks the node unverified, and its yeses count only once
// confirm allows them (otherwise each is a failure with confirm's error).
func (l *Locker) confirmAll(ctx context.Context, i int, votes []vote) {
	var failed, yes bool
	for _, v := range votes {
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
		for k := range votes {
			if votes[k].ok && votes[k].err == nil {
				votes[k] = vote{err: err}
			}
		}
	}
}

// sharded reports whether node i spreads its keys over several servers
// (see Sharded).
func (l *Locker) sharded(i int) bool {
	s, ok := l.nodes[i].(driver.Sharded)
	return ok && s.Sharded()
}
