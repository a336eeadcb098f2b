package core

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is node health: a node whose call timed out or could not
// connect is suspect. A round asks it in the background, one call at a
// time, and waits for it only while the round's outcome is open; releases
// owed to it wait until it answers again; and a probe asks it every node
// timeout (at least 100 ms) until it does. Why: docs/design.md, node health.

// health is what a Locker knows of its nodes' health.
type health struct {
	l     *Locker
	nodes []nodeHealth

	mu     sync.Mutex
	closed bool
	stop   chan struct{} // closed by close: probes make a last try and end
	probes sync.WaitGroup
}

// nodeHealth is one node's health.
type nodeHealth struct {
	suspect atomic.Bool
	// lane holds a token while a background call to it runs, one at a
	// time (a channel rather than a mutex: testing/synctest sees a wait on
	// it as durable).
	lane chan struct{}
	// tried is when a round last asked it in the background (UnixNano of
	// the Locker's clock): rounds ask it at most once per node timeout.
	tried atomic.Int64
	// A round's errors for it while suspect: not asked, or asked in the
	// background and not waited for; each wraps the failure that made it
	// suspect.
	why atomic.Pointer[suspectErrors]

	mu      sync.Mutex
	probing bool          // a probe goroutine runs
	owed    []owedRelease // releases to send once it answers, oldest first
}

// tryLane takes the lane's token if no call holds it.
func (n *nodeHealth) tryLane() bool {
	select {
	case n.lane <- struct{}{}:
		return true
	default:
		return false
	}
}

// owedRelease is a release a suspect node was not sent.
type owedRelease struct {
	key, value string
	until      time.Time // the key has expired by then: no need to send it
}

// minProbeInterval is the least time between two probes of a suspect node.
const minProbeInterval = 100 * time.Millisecond

// maxOwed bounds the releases owed to one node; the oldest are dropped
// (their keys expire at their TTL).
const maxOwed = 4096

func newHealth(l *Locker) *health {
	h := &health{l: l, nodes: make([]nodeHealth, len(l.nodes)), stop: make(chan struct{})}
	for i := range h.nodes {
		h.nodes[i].why.Store(newSuspectErrors(l.names[i], nil))
		h.nodes[i].lane = make(chan struct{}, 1)
	}
	return h
}

// suspectErrors are a suspect node's results in a round.
type suspectErrors struct{ skipped, unanswered error }

func newSuspectErrors(node string, cause error) *suspectErrors {
	return &suspectErrors{
		skipped:    &suspectError{node: node, what: "not asked", cause: cause},
		unanswered: &suspectError{node: node, what: "asked in the background, not waited for", asked: true, cause: cause},
	}
}

// skipped is the result of suspect node i when a round did not ask it.
func (h *health) skipped(i int) error { return h.nodes[i].why.Load().skipped }

// unanswered is the result of suspect node i when a round asked it in the
// background and did not wait for the answer.
func (h *health) unanswered(i int) error { return h.nodes[i].why.Load().unanswered }

// suspectError is the result of a suspect node a round did not wait for.
type suspectError struct {
	node, what string
	asked      bool  // in the background
	cause      error // the failure that made it suspect
}

// notAsked reports whether err is a suspect node's that a round did not ask.
func notAsked(err error) bool {
	se, ok := err.(*suspectError)
	return ok && !se.asked
}

func (e *suspectError) Error() string {
	msg := "quorumlock: node " + strconv.Quote(e.node) + " " + e.what + ": suspect until it answers again"
	if e.cause != nil {
		msg += ", since: " + e.cause.Error()
	}
	return msg
}

func (e *suspectError) Unwrap() []error { return []error{ErrNodeSuspect, e.cause} }

// suspect reports whether node i is suspect.
func (h *health) suspect(i int) bool { return h.nodes[i].suspect.Load() }

// failed records that a call to node i timed out or could not connect,
// with err: the node is suspect from now on, and probed until it answers.
// A sharded node (a Redis Cluster) never is: one master down says nothing
// of the keys on the others.
func (h *health) failed(i int, err error) {
	n := &h.nodes[i]
	if n.suspect.Load() || h.l.sharded(i) {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.suspect.Load() {
		return
	}
	n.why.Store(newSuspectErrors(h.l.names[i], err))
	n.suspect.Store(true)
	h.l.hub.heraldMoved()
	if n.probing {
		return
	}
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.probes.Add(1)
	}
	h.mu.Unlock()
	if !closed {
		n.probing = true
		go h.probe(i)
	}
}

// broken reports whether a failed call shows that its node is unreachable
// or hung: it timed out (by its context, or by a socket deadline, which can
// fire before the context says so), or a connection could not be made or
// was lost.
func broken(err error, timedOut bool) bool {
	var op *net.OpError
	var ne net.Error
	return timedOut || errors.As(err, &op) || errors.As(err, &ne) && ne.Timeout() ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// lost reports whether a call to node i under ctx, bounded by the node
// timeout, that returned err shows the node unreachable or hung: broken,
// or out of time (ctx's deadline passed, even if its timer has not fired
// yet, or the node says the error is its context's). Another node's
// failure (an identity check's uncheckedError) is not node i's.
func (h *health) lost(ctx context.Context, i int, err error) bool {
	if err == nil || othersFailure(err) {
		return false
	}
	timedOut := ctx.Err() != nil || deadlinePassed(ctx) || h.l.nodes[i].Classify(err) == driver.KindContext
	return broken(err, timedOut)
}

// background runs fn, a call to node i, in a goroutine Close waits for,
// after any call to the node already running there; but without queue,
// not at all when one runs or one started less than a node timeout ago
// (a dead node refuses at once: asked by every round, it would cost a
// connection attempt each). It reports false, running nothing, when the
// Locker is closed.
func (h *health) background(i int, queue bool, fn func()) bool {
	n := &h.nodes[i]
	if !queue {
		now := h.l.o.clock.Now().UnixNano()
		if last := n.tried.Load(); now-last < int64(h.l.o.nodeTimeout) && now >= last {
			return false
		}
		if !n.tryLane() {
			return false
		}
		n.tried.Store(now)
	}
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.probes.Add(1)
	}
	h.mu.Unlock()
	if closed {
		if !queue {
			<-n.lane
		}
		return false
	}
	go func() {
		defer h.probes.Done()
		if queue {
			n.lane <- struct{}{}
		}
		defer func() { <-n.lane }()
		fn()
	}()
	return true
}

// probe asks suspect node i who it is every node timeout (at least
// minProbeInterval), unless another call to it runs, until it answers,
// then lets it rejoin. When the Locker closes it makes a last try, if
// releases are owed, and ends.
func (h *health) probe(i int) {
	defer h.probes.Done()
	l, n := h.l, &h.nodes[i]
	for {
		last := false
		t := l.o.clock.NewTimer(max(l.o.nodeTimeout, minProbeInterval))
		select {
		case <-t.C():
		case <-h.stop:
			last = true
		}
		t.Stop()
		n.mu.Lock()
		if !n.suspect.Load() || last && len(n.owed) == 0 {
			n.probing = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		if n.tryLane() {
			if h.answers(i) {
				h.rejoin(i)
			}
			<-n.lane
		}
		if last {
			n.mu.Lock()
			n.probing = false
			n.mu.Unlock()
			return
		}
	}
}

// answers reports whether node i answers a check of its identity within
// the node timeout (an answer saying it is a duplicate counts).
func (h *health) answers(i int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), h.l.o.nodeTimeout)
	defer cancel()
	return !h.lost(ctx, i, h.l.identify(ctx, i, h.l.ident.state[i].Load()))
}

// rejoin makes node i healthy again and sends it the releases it is owed,
// one by one; a failure makes it suspect again, still owed the rest.
func (h *health) rejoin(i int) {
	l, n := h.l, &h.nodes[i]
	n.mu.Lock()
	owed := n.owed
	n.owed = nil
	n.suspect.Store(false)
	n.mu.Unlock()
	l.hub.heraldMoved()
	for k, o := range owed {
		if !l.o.clock.Now().Before(o.until) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.o.nodeTimeout)
		_, err := l.scriptAnswerOnce(ctx, i, driver.ScriptRelease, []string{o.key}, []string{o.value})
		lost := h.lost(ctx, i, err)
		cancel()
		if lost {
			h.failed(i, err)
			for _, rest := range owed[k:] {
				h.owe(i, rest.key, rest.value)
			}
			return
		}
	}
}

// owe records that node i is owed the release of key holding value, while
// it is suspect; once it has answered again, it is owed nothing more.
func (h *health) owe(i int, key, value string) {
	n := &h.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.suspect.Load() {
		return
	}
	now := h.l.o.clock.Now()
	drop := 0
	for drop < len(n.owed) && !now.Before(n.owed[drop].until) {
		drop++
	}
	if len(n.owed)-drop >= maxOwed {
		drop++
	}
	if drop > 0 {
		n.owed = append(n.owed[:0], n.owed[drop:]...)
	}
	n.owed = append(n.owed, owedRelease{key: key, value: value, until: now.Add(h.l.o.ttl)})
}

// suspects returns the names of the suspect nodes, in node order.
func (h *health) suspects() []string {
	var out []string
	for i := range h.nodes {
		if h.suspect(i) {
			out = append(out, h.l.names[i])
		}
	}
	return out
}

// reached reports whether res is an answer from its node, if only an
// error: not a timeout nor a lost connection.
func reached(res *NodeResult) bool {
	if res.Outcome == OutcomeOK || res.Outcome == OutcomeRefused {
		return true
	}
	var te *nodeTimeoutError
	return res.Outcome == OutcomeFailed && !errors.As(res.Err, &te) && !errors.Is(res.Err, ErrNodeSuspect) && !broken(res.Err, false)
}

// close makes every probe a last try, if releases are owed, and waits for
// them.
func (h *health) close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.stop)
	}
	h.mu.Unlock()
	h.probes.Wait()
}

// heraldNow returns the herald: the first node by name that is not
// suspect, so that every Locker that sees the same nodes suspect picks
// the same one (docs/design.md, the herald's failover).
func (l *Locker) heraldNow() int {
	for _, i := range l.order {
		if !l.health.suspect(i) {
			return i
		}
	}
	return l.herald
}
