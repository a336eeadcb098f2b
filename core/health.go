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
// time, and waits for it only while the round's outcome is open; a
// release it cannot ask at once is owed, and sent after the node's next
// answer; and a probe asks it every node timeout (at least 100 ms) until
// it answers. Why: docs/design.md, node health.

// health is what a Locker knows of its nodes' health.
type health struct {
	healthDeps
	status []nodeHealth // per node

	// ctx bounds the calls of probes and deliveries: cancelled once
	// Close's last try is over (lastTry after close).
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	stop   chan struct{} // closed by close: probes make a last try and end
	probes sync.WaitGroup
}

// nodeHealth is one node's health.
type nodeHealth struct {
	// lane holds a token while a background call to it runs, one at a
	// time (a channel rather than a mutex: testing/synctest sees a wait on
	// it as durable).
	lane chan struct{}
	// tried is when a round last asked it in the background (UnixNano of
	// the Locker's clock): rounds ask it at most once per node timeout.
	tried atomic.Int64
	// A round's errors for it while suspect: not asked, asked in the
	// background and not waited for, or owed a release; each wraps the
	// failure that made it suspect.
	why atomic.Pointer[suspectErrors]

	mu      sync.Mutex
	probing bool                       // a probe goroutine runs
	owed    []*owedEntry               // releases to send once it answers, oldest first
	owedSet map[owedRelease]*owedEntry // the same, to owe each once
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

// owedRelease is a release a suspect node was not sent, or did not
// answer. It never expires: a server that hangs reads a SET sent before
// it hung only when it resumes, and the key lives a TTL from then.
type owedRelease struct {
	kind  lockKind
	value string
}

// owedEntry is an owed release and the release rounds that wait for its
// answer.
type owedEntry struct {
	rel   owedRelease
	waits []*suspectCall
}

// suspectCall is a round's call to a suspect node that the round may wait
// for (suspectCalls): made in the background, or an owed release. res is set
// before it is sent on arrived, once.
type suspectCall struct {
	i       int
	res     NodeResult
	arrived chan<- *suspectCall // buffered: one slot per node
}

// answered gives the rounds waiting for e the answer res.
func (e *owedEntry) answered(res NodeResult) {
	for _, lc := range e.waits {
		lc.res = res
		lc.arrived <- lc
	}
	e.waits = nil
}

// minProbeInterval is the least time between two probes of a suspect node.
const minProbeInterval = 100 * time.Millisecond

// maxOwed bounds the releases owed to one node; the oldest are dropped
// (their keys expire at their TTL).
const maxOwed = 4096

// owedBatch is how many owed releases go to a driver.Batcher node in one
// round trip.
const owedBatch = 256

// lastTryFactor bounds Close's last try for owed releases: it ends this
// many node timeouts after Close began (one to answer the identity check,
// the rest to send them).
const lastTryFactor = 5

// healthDeps is what the health uses of its Locker, given by New.
type healthDeps struct {
	nodes       []Node
	names       []string
	clock       driver.Clock
	nodeTimeout time.Duration
	marks       suspects         // which nodes are suspect, set here only
	sharded     func(i int) bool // node i spreads its keys over several servers
	moved       func()           // a node turned suspect or healthy: the herald may have moved
	// identify checks node i's identity (an answer saying it is a
	// duplicate is no error).
	identify func(ctx context.Context, i int) error
	// sendOwed sends node i the owed releases, all in one round trip (at
	// most owedBatch) on a driver.Batcher, else the only one, and gives
	// each its answer; it returns an error that shows the node lost, with
	// no release answered, else nil.
	sendOwed func(ctx context.Context, i int, owed []*owedEntry) error
}

func newHealth(d healthDeps) *health {
	h := &health{healthDeps: d, status: make([]nodeHealth, len(d.nodes)), stop: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	for i := range h.status {
		h.status[i].why.Store(newSuspectErrors(d.names[i], nil))
		h.status[i].lane = make(chan struct{}, 1)
	}
	return h
}

// suspectErrors are a suspect node's results in a round.
type suspectErrors struct{ skipped, unanswered, owed error }

func newSuspectErrors(node string, cause error) *suspectErrors {
	return &suspectErrors{
		skipped:    &suspectError{node: node, what: "not asked", cause: cause},
		unanswered: &suspectError{node: node, what: "asked in the background, not waited for", asked: true, cause: cause},
		owed:       &suspectError{node: node, what: "not asked: the release is owed to it, sent once it answers", cause: cause},
	}
}

// skipped is the result of suspect node i when a round did not ask it.
func (h *health) skipped(i int) error { return h.status[i].why.Load().skipped }

// unanswered is the result of suspect node i when a round asked it in the
// background and did not wait for the answer.
func (h *health) unanswered(i int) error { return h.status[i].why.Load().unanswered }

// owedErr is the result of suspect node i when a release round owed it
// the release instead of asking it.
func (h *health) owedErr(i int) error { return h.status[i].why.Load().owed }

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

// failed records that a call to node i timed out or could not connect,
// with err: the node is suspect from now on, and probed until it answers.
// A sharded node (a Redis Cluster) never is: one master down says nothing
// of the keys on the others.
func (h *health) failed(i int, err error) {
	n := &h.status[i]
	if h.marks.is(i) || h.sharded(i) {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if h.marks.is(i) {
		return
	}
	n.why.Store(newSuspectErrors(h.names[i], err))
	h.marks[i].Store(true)
	h.moved()
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
	timedOut := ctx.Err() != nil || deadlinePassed(ctx) || h.nodes[i].Classify(err) == driver.KindContext
	return broken(err, timedOut)
}

// background runs fn, a call to suspect node i, in a goroutine Close
// waits for, if no call to the node runs there (one holds its lane); with
// throttle, not when one started less than a node timeout ago either (a
// dead node refuses at once: asked by every round, it would cost a
// connection attempt each). fn runs holding the lane and may give it up
// early with free. It reports false, running nothing, when it did not run
// fn, or the Locker is closed.
func (h *health) background(i int, throttle bool, fn func(free func())) bool {
	n := &h.status[i]
	now := h.clock.Now().UnixNano()
	if throttle {
		if last := n.tried.Load(); now-last < int64(h.nodeTimeout) && now >= last {
			return false
		}
	}
	if !n.tryLane() {
		return false
	}
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.probes.Add(1)
	}
	h.mu.Unlock()
	if closed {
		<-n.lane
		return false
	}
	if throttle {
		n.tried.Store(now)
	}
	go func() {
		defer h.probes.Done()
		var once sync.Once
		free := func() { once.Do(func() { <-n.lane }) }
		defer free()
		fn(free)
	}()
	return true
}

// probe asks suspect node i who it is every node timeout (at least
// minProbeInterval), unless another call to it runs, until it answers,
// then lets it rejoin. When the Locker closes it makes a last try, if
// releases are owed, and ends.
func (h *health) probe(i int) {
	defer h.probes.Done()
	n := &h.status[i]
	for {
		last := false
		t := h.clock.NewTimer(max(h.nodeTimeout, minProbeInterval))
		select {
		case <-t.C():
		case <-h.stop:
			last = true
		}
		t.Stop()
		n.mu.Lock()
		if !h.marks.is(i) || last && len(n.owed) == 0 {
			n.probing = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		if h.takeLane(i, last) {
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

// takeLane takes node i's lane for a probe: at once or not at all, but
// for the last try, which waits for the call running there (a call ends
// within the node timeout; Close's bound, h.ctx, cuts the wait), so that
// the releases owed are not dropped behind a call that fails.
func (h *health) takeLane(i int, last bool) bool {
	n := &h.status[i]
	if !last {
		return n.tryLane()
	}
	select {
	case n.lane <- struct{}{}:
		return true
	case <-h.ctx.Done():
		return false
	}
}

// answers reports whether node i answers a check of its identity within
// the node timeout (an answer saying it is a duplicate counts).
func (h *health) answers(i int) bool {
	ctx, cancel := context.WithTimeout(h.ctx, h.nodeTimeout)
	defer cancel()
	return !h.lost(ctx, i, h.identify(ctx, i))
}

// rejoin runs after node i answered a call, holding its lane: it sends
// the node the releases it is owed, then makes it healthy. The node's
// answer means it has read every command sent to it before, on any
// connection, so no owed release overtakes the SET it undoes. A lost
// call leaves the node suspect, owed the rest.
func (h *health) rejoin(i int) {
	n := &h.status[i]
	for {
		n.mu.Lock()
		owed := n.owed
		if len(owed) == 0 {
			h.marks[i].Store(false)
			n.mu.Unlock()
			h.moved()
			return
		}
		n.owed = nil
		clear(n.owedSet)
		n.mu.Unlock()
		if !h.deliver(i, owed) {
			return
		}
	}
}

// deliver sends node i the releases owed, oldest first: in batches of
// owedBatch on a driver.Batcher node, else one by one, each call within
// the node timeout. It reports whether all were sent; after a lost call
// the rest are owed again. Once the Locker's last try is over it stops,
// and what is left expires at its TTL.
func (h *health) deliver(i int, owed []*owedEntry) bool {
	_, batcher := h.nodes[i].(driver.Batcher)
	for len(owed) > 0 {
		m := 1
		if batcher {
			m = min(owedBatch, len(owed))
		}
		ctx, cancel := context.WithTimeout(h.ctx, h.nodeTimeout)
		err := h.sendOwed(ctx, i, owed[:m])
		lost := h.lost(ctx, i, err)
		cancel()
		if lost {
			h.failed(i, err)
			res := NodeResult{Outcome: OutcomeFailed, Err: h.owedErr(i)} // owed again
			for _, e := range owed {
				e.answered(res)
				h.owe(i, e.rel, nil)
			}
			return false
		}
		owed = owed[m:]
	}
	return true
}

// releaseOwed sends the owed releases to node i, in one round trip on a
// Batcher (b not nil), else the only one, and gives each its answer. It
// returns the first error that shows the node unreachable or hung (then
// no release has its answer), else nil: a release the server refused (a
// server error) is answered so, and not sent again.
func (l *Locker) releaseOwed(ctx context.Context, i int, b driver.Batcher, owed []*owedEntry) error {
	var res NodeResult
	if b == nil {
		r := owed[0].rel.kind.release(owed[0].rel.value, false)
		a, err := l.requestAnswerOnce(ctx, i, &r)
		if l.health.lost(ctx, i, err) {
			return err
		}
		res.Outcome, res.Err = l.outcome(i, a > 0, err, false, false, l.o.nodeTimeout)
		owed[0].answered(res)
		return nil
	}
	reqs := make([]request, len(owed))
	for j, e := range owed {
		reqs[j] = e.rel.kind.release(e.rel.value, false)
	}
	calls := l.sendBatch(ctx, i, b, reqs)
	for j := range calls {
		if l.health.lost(ctx, i, calls[j].Err) {
			return calls[j].Err
		}
	}
	for j, e := range owed {
		ok, err := false, calls[j].Err
		if err == nil {
			ok, err = voteOf(reqs[j].script, calls[j].Reply)
		}
		res.Outcome, res.Err = l.outcome(i, ok, err, false, false, l.o.nodeTimeout)
		e.answered(res)
	}
	return nil
}

// owe records that suspect node i is owed rel, once, and reports whether
// it did: not when the node is healthy again (ask it instead). With wait,
// a release round waits for its answer: wait is sent on its arrived
// channel with the answer, or a failure when the release is dropped.
func (h *health) owe(i int, rel owedRelease, wait *suspectCall) bool {
	n := &h.status[i]
	n.mu.Lock()
	if !h.marks.is(i) {
		n.mu.Unlock()
		return false
	}
	e := n.owedSet[rel]
	var dropped *owedEntry
	if e == nil {
		if len(n.owed) >= maxOwed {
			dropped = n.owed[0]
			delete(n.owedSet, dropped.rel)
			n.owed = append(n.owed[:0], n.owed[1:]...)
		}
		if n.owedSet == nil {
			n.owedSet = make(map[owedRelease]*owedEntry)
		}
		e = &owedEntry{rel: rel}
		n.owed = append(n.owed, e)
		n.owedSet[rel] = e
	}
	if wait != nil {
		e.waits = append(e.waits, wait)
	}
	n.mu.Unlock()
	if dropped != nil {
		dropped.answered(NodeResult{Outcome: OutcomeFailed, Err: h.owedErr(i)})
	}
	return true
}

// owedCount returns the number of releases owed, over all nodes.
func (h *health) owedCount() (owed int) {
	for i := range h.status {
		n := &h.status[i]
		n.mu.Lock()
		owed += len(n.owed)
		n.mu.Unlock()
	}
	return owed
}

// suspects returns the names of the suspect nodes, in node order.
func (h *health) suspects() []string {
	var out []string
	for i := range h.status {
		if h.marks.is(i) {
			out = append(out, h.names[i])
		}
	}
	return out
}

// close makes every probe a last try, if releases are owed, and waits for
// them and the calls in the background: lastTryFactor node timeouts at
// most, then their calls are cut.
func (h *health) close() {
	h.mu.Lock()
	var end driver.Timer
	if !h.closed {
		h.closed = true
		close(h.stop)
		end = h.clock.AfterFunc(lastTryFactor*h.nodeTimeout, h.cancel)
	}
	h.mu.Unlock()
	h.probes.Wait()
	if end != nil {
		end.Stop()
	}
	h.cancel()
}

// suspectCalls are a round's calls to suspect nodes, made in the background
// (one at a time per node: a node with one running is not asked), and
// the releases it owes them.
type suspectCalls struct {
	mu      sync.Mutex
	calls   []*suspectCall
	owed    bool              // some calls are owed releases
	arrived chan *suspectCall // buffered: one slot per node
}

// start asks suspect node i in the background, if no call to it runs,
// and records in res that it was not waited for. Otherwise an acquisition
// or extension does not ask it, and a release (rel not nil) is owed to
// it. A release that the call does not get answered is owed too. It
// reports false when node i is healthy again: ask it.
func (c *suspectCalls) start(ctx context.Context, l *Locker, i int, call nodeCall, rel *owedRelease, res *NodeResult) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.arrived == nil {
		c.arrived = make(chan *suspectCall, len(l.nodes))
	}
	sc := &suspectCall{i: i, arrived: c.arrived}
	started := l.health.background(i, rel == nil, func(free func()) {
		dctx := detached(ctx)
		actx, cancel := context.WithTimeout(dctx, l.o.nodeTimeout)
		l.attempt(dctx, actx, i, call, &sc.res)
		cancel()
		if !reached(&sc.res) {
			if rel != nil {
				l.health.owe(i, *rel, nil)
			}
			free() // before the answer: a Release tried again may ask it
			sc.arrived <- sc
			return
		}
		sc.arrived <- sc // the round need not wait for the releases owed
		l.health.rejoin(i)
	})
	switch {
	case started:
		res.Outcome, res.Err = OutcomeFailed, l.health.unanswered(i)
	case rel == nil:
		res.Outcome, res.Err = OutcomeFailed, l.health.skipped(i)
		return true
	case l.health.owe(i, *rel, sc):
		res.Outcome, res.Err = OutcomeFailed, l.health.owedErr(i)
		c.owed = true
	default:
		return false
	}
	c.calls = append(c.calls, sc)
	return true
}

// await waits for the suspect calls while the round's outcome is open: no
// quorum yet, but one still possible with them; their answers go to
// results. It stops when ctx ends, and waits for owed releases until
// deadline at most, by clock. It runs after the strategy, whose attempts
// (and so every start) have returned: no lock is needed.
func (c *suspectCalls) await(ctx context.Context, clock driver.Clock, quorum int, results []NodeResult, deadline time.Time) {
	var timeout <-chan time.Time
	if c.owed {
		t := clock.NewTimer(deadline.Sub(clock.Now()))
		defer t.Stop()
		timeout = t.C()
	}
	for pending := len(c.calls); pending > 0; {
		ok, _, _ := tally(results)
		if ok >= quorum || ok+pending < quorum {
			return
		}
		select {
		case sc := <-c.arrived:
			results[sc.i] = sc.res
			pending--
		case <-ctx.Done():
			return
		case <-timeout:
			return
		}
	}
}
