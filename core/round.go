package core

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"

	"github.com/quorumlock/quorumlock/strategies"
)

// nodeCall is what node i is asked in a round; it reports the node's vote.
type nodeCall func(ctx context.Context, i int) (bool, error)

// releaseStrategy sends releases: to every node at once, waiting for every
// answer (Redlock rule 6).
var releaseStrategy = strategies.Parallel()

// askNodes makes one round: it runs call on the nodes under strategy s
// and returns every node's result. The strategy only orders the calls; the votes are counted here.
// A suspect node is asked in the background, and waited for only while
// the round's outcome is open (suspectCalls).
func (l *Locker) askNodes(ctx context.Context, s strategies.Strategy, call nodeCall) []NodeResult {
	return l.askNodesOwing(ctx, s, call, nil, nil)
}

// owing is a release round's: which nodes need the call at all, and what
// a suspect node is owed when it cannot be asked or does not answer.
type owing struct {
	rel     owedRelease
	skipped uint64       // nodes never sent the acquisition
	prev    []NodeResult // an earlier release round's results
}

// notSent is the result of a release to a node never sent the
// acquisition: nothing to release there, and not asked.
var notSent = NodeResult{Outcome: OutcomeNotTried}

// known returns node i's result when the release need not ask it: it was
// never sent the acquisition, or it answered an earlier release. Else nil.
func (o *owing) known(i int) *NodeResult {
	switch {
	case i < 64 && o.skipped&(1<<i) != 0:
		return &notSent
	case o.prev != nil && (o.prev[i].Outcome == OutcomeOK || o.prev[i].Outcome == OutcomeRefused):
		return &o.prev[i]
	}
	return nil
}

// askNodesOwing is askNodes, but with results known before it asks (known(i)
// not nil: node i is not asked, and that is its result), and for a
// release (o not nil) what o says. A release that a suspect node cannot
// be sent at once, or does not answer, is owed to it.
func (l *Locker) askNodesOwing(ctx context.Context, s strategies.Strategy, call nodeCall, known func(i int) *NodeResult, o *owing) []NodeResult {
	n := len(l.nodes)
	st := new(roundState) // one allocation for up to smallRound nodes
	results, verdicts := st.results[:], st.verdicts[:]
	if n <= smallRound {
		results, verdicts = results[:n:n], verdicts[:n:n]
	} else {
		results, verdicts = make([]NodeResult, n), make([]strategies.Result, n)
	}
	var rel *owedRelease
	var start time.Time // a release's: bounds its wait for owed releases
	if o != nil {
		known, rel, start = o.known, &o.rel, l.o.clock.Now()
	}
	bg := &st.background
	s.Run(ctx, strategies.Round{
		Nodes:   n,
		Quorum:  l.o.quorum,
		Timeout: l.o.nodeTimeout,
		Attempt: func(actx context.Context, i int) bool {
			if known != nil {
				if r := known(i); r != nil {
					results[i] = *r
					return r.Outcome == OutcomeOK
				}
			}
			if l.health.suspect(i) && bg.start(ctx, l, i, call, rel, &results[i]) {
				return false
			}
			ok := l.attempt(ctx, actx, i, call, &results[i])
			if rel != nil && !reached(&results[i]) {
				// A release lost on the way (the node hung or dropped the
				// connection just now) is owed too: it may never have
				// been written.
				l.health.owe(i, *rel, nil)
			}
			return ok
		},
	}, verdicts)
	bg.await(ctx, l.o.clock, l.o.quorum, results, start.Add(l.o.nodeTimeout))
	for i := range results {
		results[i].Index = i
		results[i].Node = l.names[i]
	}
	return results
}

// smallRound is the number of nodes up to which a round's state is one
// allocation (roundState).
const smallRound = 5

// roundState is a round's results, the strategy's verdicts and the
// suspect calls, for up to smallRound nodes.
type roundState struct {
	results    [smallRound]NodeResult
	verdicts   [smallRound]strategies.Result
	background suspectCalls
}

// attempt asks node i once, under actx (the caller's ctx bounded by the
// node timeout), records the answer in res and reports whether it is a
// vote for.
func (l *Locker) attempt(ctx, actx context.Context, i int, call nodeCall, res *NodeResult) bool {
	start := l.o.clock.Now()
	ok, err := l.checkedCall(actx, i, call) // one server, one vote (identity.go)
	res.Latency = l.o.clock.Now().Sub(start)
	// A passed deadline counts before its timer fires: a driver's socket
	// deadline can beat it (docs/design.md, each node's outcome).
	var cut, timedOut bool
	if err != nil {
		cut = ctx.Err() != nil || errors.Is(actx.Err(), context.Canceled) || deadlinePassed(ctx)
		timedOut = actx.Err() != nil || deadlinePassed(actx)
	}
	res.Outcome, res.Err = l.outcome(i, ok, err, cut, timedOut, l.o.nodeTimeout)
	return res.Outcome == OutcomeOK
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

// outcome classifies one node's answer to a call bounded by the node
// timeout: cut says the call was cut off from outside (by the caller or
// the strategy), timedOut that its own deadline passed. A timeout or a
// lost connection makes the node suspect.
func (l *Locker) outcome(i int, ok bool, err error, cut, timedOut bool, timeout time.Duration) (Outcome, error) {
	node := l.nodes[i]
	switch {
	case err == nil && ok:
		return OutcomeOK, nil
	case err == nil:
		return OutcomeRefused, nil
	case cut:
		return OutcomeCanceled, nil
	case othersFailure(err): // identify blamed the node that failed
		return OutcomeFailed, err
	case timedOut || node.Classify(err) == driver.KindContext:
		err = timeoutError(timeout, node, err)
		l.health.failed(i, err)
		return OutcomeFailed, err
	default:
		if broken(err, false) {
			l.health.failed(i, err)
		}
		return OutcomeFailed, err
	}
}

// deadlinePassed reports whether c has a deadline that has passed.
func deadlinePassed(c context.Context) bool {
	d, ok := c.Deadline()
	return ok && !time.Now().Before(d)
}

// blankResults returns a result per node, each not tried.
func (l *Locker) blankResults() []NodeResult {
	nodes := make([]NodeResult, len(l.nodes))
	for i := range nodes {
		nodes[i] = NodeResult{Index: i, Node: l.names[i]}
	}
	return nodes
}

func timeoutError(after time.Duration, n Node, err error) error {
	if n.Classify(err) == driver.KindContext || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return &nodeTimeoutError{after: after, err: err}
}

// tally counts a round's results.
func tally(results []NodeResult) (ok, refused, failed int) {
	for i := range results {
		switch results[i].Outcome {
		case OutcomeOK:
			ok++
		case OutcomeRefused:
			refused++
		case OutcomeFailed:
			failed++
		}
	}
	return ok, refused, failed
}

// detached returns a context for clean-up that must run even when ctx has
// ended: ctx's values without its cancellation or deadline. The node
// timeout of releaseStrategy's calls bounds it.
func detached(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// releaseAll asks every node to release value's hold of k, but for the
// nodes in skipped, never sent it. With notify, the herald also hands the
// lock to the oldest waiter in its queue, and handed reports that it did.
// Nodes that answered prev, an earlier release of the same value, are not
// asked again. A release to a suspect node runs in the background if no
// call runs there, and is owed to it otherwise, or if not answered: sent
// after the node's next answer (health.rejoin).
func (l *Locker) releaseAll(ctx context.Context, k lockKind, value string, notify bool, prev []NodeResult, skipped uint64) (results []NodeResult, handed bool) {
	st := &struct { // one allocation
		plain, herald request
		answer        atomic.Int64
		o             owing
	}{plain: k.release(value, false), o: owing{rel: owedRelease{kind: k, value: value}, skipped: skipped, prev: prev}}
	herald := -1
	if notify {
		herald = l.heraldNow()
		st.herald = k.release(value, true)
	}
	results = l.askNodesOwing(ctx, releaseStrategy, func(ctx context.Context, i int) (bool, error) {
		if i != herald {
			return l.requestVote(ctx, i, &st.plain)
		}
		a, err := l.requestAnswer(ctx, i, &st.herald)
		st.answer.Store(a)
		return a > 0, err
	}, nil, &st.o)
	return results, st.answer.Load() == 2
}

// skippedNodes returns the bits of the nodes a round never sent its call:
// it left out as suspect (none beyond 64 nodes: those are all released).
func (l *Locker) skippedNodes(results []NodeResult) (mask uint64) {
	if len(results) > 64 {
		return 0
	}
	for i := range results {
		if notAsked(results[i].Err) {
			mask |= 1 << i
		}
	}
	return mask
}

// contextError is the caller's context error with its cause, if distinct.
func contextError(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return errors.Join(err, cause)
	}
	return err
}

// leaderRound is the round of a waiter woken by an empty release notice:
// it asks the nodes one by one in name order until one answers, and goes
// on under the Locker's strategy only if that one granted, so that woken
// waiters do not split the votes (docs/design.md, leader rounds).
func (l *Locker) leaderRound(ctx context.Context, call nodeCall) []NodeResult {
	results := l.blankResults()
	for _, i := range l.order {
		if ctx.Err() != nil {
			break
		}
		if l.health.suspect(i) {
			continue // the round below asks it in the background
		}
		actx, cancel := context.WithTimeout(ctx, l.o.nodeTimeout)
		granted := l.attempt(ctx, actx, i, call, &results[i])
		cancel()
		switch {
		case results[i].Outcome != OutcomeRefused && !granted:
			continue
		case !granted:
			return results
		}
		// The leader's grant is its result: not a call to make again,
		// nor one to make in the background if it turns suspect now.
		leader, grant := i, results[i]
		return l.askNodesOwing(ctx, l.o.strategy, call, func(i int) *NodeResult {
			if i == leader {
				return &grant
			}
			return nil
		}, nil)
	}
	return l.askNodes(ctx, l.o.strategy, call)
}

// acquireOnce is one round of the Redlock algorithm for the lock k on key,
// with the fencing step when k is fenced, a leaderRound after an empty
// notice or a split. A failed round releases every node; it reports
// whether that handed the key on.
func (l *Locker) acquireOnce(ctx context.Context, key string, k lockKind, woken wakeKind) (*Lock, *QuorumError, bool) {
	value := newValue()
	ttl := l.o.ttl
	start := l.o.clock.Now()
	call, counters := l.grantCall(k, value)

	var results []NodeResult
	if (woken == wokenByNotice || woken == wokenBySplit) && len(l.nodes) > 1 {
		results = l.leaderRound(ctx, call)
	} else {
		results = l.askNodes(ctx, l.o.strategy, call)
	}
	ok, _, _ := tally(results)
	var token int64
	var fenceErr *QuorumError
	if counters != nil && ok >= l.o.quorum {
		token, fenceErr = l.raiseFence(ctx, key, k.fence(), results, counters)
	}
	validity := ttl - l.o.clock.Now().Sub(start) - l.o.drift()
	if ok >= l.o.quorum && validity > 0 && fenceErr == nil {
		lock := &Lock{locker: l, key: key, kind: k, value: value, token: token, taken: start, deadline: start.Add(ttl - l.o.drift()), skipped: l.skippedNodes(results)}
		if l.obs != nil {
			lock.nodes = results // kept for the Observer only
		}
		return lock, nil, false
	}

	// Redlock rule 5: release every node, even after ctx ended. Only a round
	// no notice started announces this release (docs/design.md, a round).
	_, handed := l.releaseAll(detached(ctx), k, value, ok > 0 && woken == wokenByNothing, nil, l.skippedNodes(results))
	if fenceErr != nil {
		fenceErr.Context = contextError(ctx)
		return nil, fenceErr, handed
	}

	qe := &QuorumError{Op: OpAcquire, Key: key, Quorum: l.o.quorum, Nodes: results, Validity: validity, Context: contextError(ctx)}
	qe.Reason = l.lostBecause(ctx, results)
	return nil, qe, handed
}

// lostBecause says why a round whose results are these won no lock.
func (l *Locker) lostBecause(ctx context.Context, results []NodeResult) error {
	ok, refused, failed := tally(results)
	_, young := guardWait(results, l.o.quorum)
	switch {
	case ok >= l.o.quorum:
		return ErrValidityExpired
	case young:
		return ErrNodeRestarted
	case failed > len(l.nodes)-l.o.quorum, ok+refused+failed == 0 && ctx.Err() == nil:
		return ErrUnavailable // too many failures, or a starved round that asked no one
	default:
		return ErrNotAcquired
	}
}
