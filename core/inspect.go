package core

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// KeyState is what the nodes hold under a key, as Locker.Inspect read it.
type KeyState struct {
	Key    string // the key as given, without the key prefix
	Quorum int    // how many nodes make a lock
	// Nodes are the nodes' answers, in the Locker's node order. A node
	// whose Outcome is not OutcomeOK did not answer: its Err says why.
	Nodes []NodeState
}

// NodeState is one node's answer to Inspect.
type NodeState struct {
	NodeResult
	// Value is the value stored under the key: the random value of the
	// lock that holds it there, "" when the key is absent.
	Value string
	// TTL is how long until the key expires on this node: 0 when it is
	// absent, -1 when it has no expiry (not written by this library).
	TTL time.Duration
	// Readers are the read locks that hold the key on this node (Value is
	// then driver.SharedValue): each reader's value and its time to live.
	Readers map[string]time.Duration
}

// Holder returns the value that the most nodes hold (the first by node
// order among equals), on how many nodes, and how long they keep it: while
// a quorum holds it, the time until fewer than a quorum do; otherwise the
// time until the last of them expires. It returns ("", 0, 0) for a key
// absent everywhere; a TTL of -1 means a key without expiry.
func (s *KeyState) Holder() (value string, nodes int, ttl time.Duration) {
	for _, n := range s.Nodes {
		if n.Outcome != OutcomeOK || n.Value == "" {
			continue
		}
		if c := s.count(n.Value); c > nodes {
			value, nodes = n.Value, c
		}
	}
	if nodes == 0 {
		return "", 0, 0
	}
	var ttls []time.Duration // longest first; no expiry counts as longest
	for _, n := range s.Nodes {
		if n.Outcome == OutcomeOK && n.Value == value {
			ttls = append(ttls, n.TTL)
		}
	}
	slices.SortFunc(ttls, func(a, b time.Duration) int { return longer(b, a) })
	if q := s.quorum(); nodes >= q {
		return value, nodes, ttls[q-1]
	}
	return value, nodes, ttls[0]
}

// Held reports whether a quorum of nodes holds one value: whether the key
// is locked.
func (s *KeyState) Held() bool {
	_, nodes, _ := s.Holder()
	return nodes >= s.quorum()
}

// quorum is Quorum, at least 1: a KeyState made by hand may leave it zero.
func (s *KeyState) quorum() int { return max(s.Quorum, 1) }

// count is how many answering nodes hold value.
func (s *KeyState) count(value string) int {
	c := 0
	for _, n := range s.Nodes {
		if n.Outcome == OutcomeOK && n.Value == value {
			c++
		}
	}
	return c
}

// longer compares two TTLs, -1 (no expiry) being the longest.
func longer(a, b time.Duration) int {
	switch {
	case a == b:
		return 0
	case a < 0:
		return 1
	case b < 0:
		return -1
	case a > b:
		return 1
	}
	return -1
}

// readArgs refuses the arguments of a read (Inspect, InspectPermits,
// Leader, Observe): a zero Locker, an empty key, a nil context.
func (l *Locker) readArgs(ctx context.Context, key string) error {
	switch {
	case l.zero():
		return errZeroLocker
	case key == "":
		return invalid("key is empty")
	case ctx == nil:
		return invalid("context is nil")
	}
	return nil
}

// Inspect reads what every node holds under key, without taking or
// changing anything: the value and its time to live on each. The calls go
// to all nodes at once, each bounded by ctx and the node timeout; a
// suspect node is asked in the background and reported as not answering
// unless it answers in time.
//
// It fails with a *QuorumError matching ErrUnavailable when fewer than a
// quorum of nodes answered (whether the key is locked is then unknown),
// ErrInvalidArgument for an empty key or nil context, and ErrClosed after
// Close.
func (l *Locker) Inspect(ctx context.Context, key string) (*KeyState, error) {
	if err := l.readArgs(ctx, key); err != nil {
		return nil, err
	}
	if !l.enter(nil) {
		return nil, l.closedError(OpInspect, key)
	}
	defer l.leave(nil)
	rkey, _, err := l.storedKeys(key)
	if err != nil {
		return nil, err
	}
	return l.inspect(ctx, key, rkey)
}

// inspect is Inspect of the stored key rkey, reported under key.
func (l *Locker) inspect(ctx context.Context, key, rkey string) (*KeyState, error) {
	inspect := newRequest(driver.ScriptInspect, []string{rkey})
	if readers, ok := driver.ReadersKey(rkey); ok {
		inspect.keys = append(inspect.keys, readers)
	}
	// Written by each node's call; read only for nodes whose call the
	// round waited for (a suspect call not waited for may still write).
	answers := make([]NodeState, len(l.nodes))
	results := l.askNodes(ctx, releaseStrategy, func(ctx context.Context, i int) (bool, error) {
		reply, err := l.send(ctx, i, &inspect)
		if err != nil {
			return false, err
		}
		err = answers[i].read(reply)
		return err == nil, err
	})
	s := &KeyState{Key: key, Quorum: l.o.quorum, Nodes: make([]NodeState, len(results))}
	for i, r := range results {
		s.Nodes[i].NodeResult = r
		if r.Outcome == OutcomeOK {
			s.Nodes[i].Value, s.Nodes[i].TTL, s.Nodes[i].Readers = answers[i].Value, answers[i].TTL, answers[i].Readers
		}
	}
	if ok, _, _ := tally(results); ok < l.o.quorum {
		return nil, &QuorumError{Op: OpInspect, Key: key, Quorum: l.o.quorum, Reason: ErrUnavailable,
			Context: contextError(ctx), Nodes: results}
	}
	return s, nil
}

// read sets the node's state from ScriptInspect's reply: {-2}, {pttl,
// value}, or for a shared lock {pttl, value, reader, ttl, ...}.
func (n *NodeState) read(reply any) error {
	bad := func() error { return fmt.Errorf("quorumlock: inspect: unexpected reply %#v", reply) }
	a, _ := reply.([]any)
	if len(a) == 0 {
		return bad()
	}
	ms, ok := a[0].(int64)
	switch {
	case !ok:
		return bad()
	case ms == -2 || len(a) == 1:
		n.Value, n.TTL = "", 0
		return nil
	case len(a)%2 != 0:
		return bad()
	}
	if n.Value, ok = a[1].(string); !ok {
		return bad()
	}
	n.TTL = millisTTL(ms)
	for j := 2; j < len(a); j += 2 {
		reader, ok1 := a[j].(string)
		ttl, ok2 := a[j+1].(int64)
		if !ok1 || !ok2 {
			return bad()
		}
		if n.Readers == nil {
			n.Readers = make(map[string]time.Duration, (len(a)-2)/2)
		}
		n.Readers[reader] = millisTTL(ttl)
	}
	return nil
}

// millisTTL is a PTTL in milliseconds as a duration; -1 stays -1.
func millisTTL(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}
