package core

import (
	"context"
	"errors"
	"fmt"
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

// round runs call on the nodes under strategy s and returns every node's
// result. The strategy only orders the calls; the votes are counted here.
// A suspect node is asked in the background, and waited for only while
// the round's outcome is open (lateCalls).
func (l *Locker) round(ctx context.Context, s strategies.Strategy, call nodeCall) []NodeResult {
	return l.roundOwing(ctx, s, call, nil)
}

// owing is a release round's: which nodes need the call at all (the
// others' calls answer without asking them), and what a suspect node is
// owed when it cannot be asked or does not answer.
type owing struct {
	key, value string
	skipped    uint64       // nodes never sent the acquisition
	prev       []NodeResult // an earlier release round's results
}

// sent reports whether node i was sent the acquisition.
func (o *owing) sent(i int) bool { return i >= 64 || o.skipped&(1<<i) == 0 }

// needs reports whether node i needs the release: sent the acquisition,
// and no answer to an earlier release.
func (o *owing) needs(i int) bool {
	return o.sent(i) && (o.prev == nil || o.prev[i].Outcome != OutcomeOK && o.prev[i].Outcome != OutcomeRefused)
}

// roundOwing is round, but for a release (o not nil): see owing. A
// release a node does not answer, because it is suspect or becomes so, is
// owed to it.
func (l *Locker) roundOwing(ctx context.Context, s strategies.Strategy, call nodeCall, o *owing) []NodeResult {
	n := len(l.nodes)
	st := new(roundState) // one allocation for up to smallRound nodes
	results, votes := st.results[:], st.votes[:]
	if n <= smallRound {
		results, votes = results[:n:n], votes[:n:n]
	} else {
		results, votes = make([]NodeResult, n), make([]strategies.Result, n)
	}
	late := &st.late
	s.Run(ctx, strategies.Round{
		Nodes:   n,
		Quorum:  l.o.quorum,
		Timeout: l.o.nodeTimeout,
		Attempt: func(actx context.Context, i int) bool {
			if l.health.suspect(i) && (o == nil || o.needs(i)) {
				late.start(ctx, l, i, call, o, &results[i])
				return false
			}
			ok := l.attempt(ctx, actx, i, call, &results[i])
			if o != nil && !reached(&results[i]) {
				// A release lost on the way (the node hung or dropped the
				// connection just now) is owed too: it may never have
				// been written.
				l.health.owe(i, o.key, o.value)
			}
			return ok
		},
	}, votes)
	late.await(ctx, l.o.quorum, results)
	for i := range results {
		results[i].Index = i
		results[i].Node = l.names[i]
	}
	return results
}

// smallRound is the number of nodes up to which a round's state is one
// allocation (roundState).
const smallRound = 5

// roundState is a round's results, the strategy's votes and the late
// calls, for up to smallRound nodes.
type roundState struct {
	results [smallRound]NodeResult
	votes   [smallRound]strategies.Result
	late    lateCalls
}

// attempt asks node i once, under actx (the caller's ctx bounded by the
// node timeout), records the answer in res and reports whether it is a
// vote for.
func (l *Locker) attempt(ctx, actx context.Context, i int, call nodeCall, res *NodeResult) bool {
	start := l.o.clock.Now()
	ok, err := l.vote(actx, i, call) // one server, one vote (identity.go)
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

// lateCalls are a round's calls to suspect nodes, made in the background
// (one at a time per node: a node with one running is not asked).
type lateCalls struct {
	mu      sync.Mutex
	calls   []*lateCall
	arrived chan *lateCall // buffered: one slot per node
}

// lateCall is one call of lateCalls; res is set before it is sent on arrived.
type lateCall struct {
	i   int
	res NodeResult
}

// start asks suspect node i in the background, and records in res that it
// was not waited for (or, when a call to it already runs, not asked). A
// release not made, or not answered, is owed.
func (c *lateCalls) start(ctx context.Context, l *Locker, i int, call nodeCall, o *owing, res *NodeResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.arrived == nil {
		c.arrived = make(chan *lateCall, len(l.nodes))
	}
	lc := &lateCall{i: i}
	arrived := c.arrived
	started := l.health.background(i, o != nil, func() {
		dctx := detached(ctx)
		actx, cancel := context.WithTimeout(dctx, l.o.nodeTimeout)
		l.attempt(dctx, actx, i, call, &lc.res)
		cancel()
		if reached(&lc.res) {
			l.health.rejoin(i)
		} else if o != nil {
			l.health.owe(i, o.key, o.value)
		}
		arrived <- lc
	})
	res.Outcome, res.Err = OutcomeFailed, l.health.skipped(i)
	switch {
	case started:
		res.Err = l.health.unanswered(i)
		c.calls = append(c.calls, lc)
	case o != nil:
		l.health.owe(i, o.key, o.value)
	}
}

// await waits for the late calls while the round's outcome is open: no
// quorum yet, but one still possible with them; their answers go to
// results. It stops when ctx ends. It runs after the strategy, whose
// attempts (and so every start) have returned: no lock is needed.
func (c *lateCalls) await(ctx context.Context, quorum int, results []NodeResult) {
	for pending := len(c.calls); pending > 0; {
		ok, _, _ := tally(results)
		if ok >= quorum || ok+pending < quorum {
			return
		}
		select {
		case lc := <-c.arrived:
			results[lc.i] = lc.res
			pending--
		case <-ctx.Done():
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

// releaseAll asks every node to delete key if it holds value, but for the
// nodes in skipped, never sent it. With notify, the herald also hands the
// key to the oldest waiter in its queue qkey (if not ""), and handed
// reports that it did. Nodes that answered prev, an earlier release of the
// same value, are not asked again. A release to a suspect node runs in the
// background after the call running there, and is owed if not answered.
func (l *Locker) releaseAll(ctx context.Context, key, qkey, value string, notify bool, prev []NodeResult, skipped uint64) (results []NodeResult, handed bool) {
	// One allocation: keys kv[:1], args kv[2:3]; on the herald kv[:2], kv[2:4].
	st := &struct {
		kv     [4]string
		answer atomic.Int64
		o      owing
	}{kv: [4]string{key, "", value, ""}, o: owing{key: key, value: value, skipped: skipped, prev: prev}}
	herald := -1
	if notify {
		herald = l.heraldNow()
		st.kv[3] = driver.ReleaseChannel(key)
		st.kv[1] = qkey
	}
	results = l.roundOwing(ctx, releaseStrategy, func(ctx context.Context, i int) (bool, error) {
		switch {
		case !st.o.sent(i):
			return false, nil // it does not hold the key
		case !st.o.needs(i):
			return prev[i].Outcome == OutcomeOK, nil
		}
		kv := &st.kv
		if i != herald {
			return l.scriptVote(ctx, i, driver.ScriptRelease, kv[:1], kv[2:3])
		}
		keys := kv[:1]
		if kv[1] != "" {
			keys = kv[:2]
		}
		a, err := l.scriptAnswer(ctx, i, driver.ScriptRelease, keys, kv[2:4])
		st.answer.Store(a)
		return a > 0, err
	}, &st.o)
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
		leader := i
		return l.round(ctx, l.o.strategy, func(ctx context.Context, i int) (bool, error) {
			if i == leader {
				return true, nil
			}
			return call(ctx, i)
		})
	}
	return l.round(ctx, l.o.strategy, call)
}

// acquireOnce is one round of the Redlock algorithm, with the fencing step
// when fence is set, a leaderRound after an empty notice or a split. A
// failed round releases every node; it reports whether that handed the key
// on.
func (l *Locker) acquireOnce(ctx context.Context, key, rkey, qkey, fence string, woken wakeKind) (*Lock, *QuorumError, bool) {
	value := newValue()
	ttl := l.o.ttl
	start := l.o.clock.Now()
	call, counters := l.acquireCall(rkey, fence, value)

	var results []NodeResult
	if (woken == wokenByNotice || woken == wokenBySplit) && len(l.nodes) > 1 {
		results = l.leaderRound(ctx, call)
	} else {
		results = l.round(ctx, l.o.strategy, call)
	}
	ok, _, _ := tally(results)
	var token int64
	var fenceErr *QuorumError
	if fence != "" && ok >= l.o.quorum {
		token, fenceErr = l.raiseFence(ctx, key, fence, results, counters)
	}
	validity := ttl - l.o.clock.Now().Sub(start) - l.o.drift()
	if ok >= l.o.quorum && validity > 0 && fenceErr == nil {
		lock := &Lock{locker: l, key: key, rkey: rkey, value: value, token: token, taken: start, deadline: start.Add(ttl - l.o.drift()), skipped: l.skippedNodes(results), qkey: qkey}
		if l.obs != nil {
			lock.nodes = results // kept for the Observer only
		}
		return lock, nil, false
	}

	// Redlock rule 5: release every node, even after ctx ended. Only a round
	// no notice started announces this release (docs/design.md, a round).
	_, handed := l.releaseAll(detached(ctx), rkey, qkey, value, ok > 0 && woken == wokenByNothing, nil, l.skippedNodes(results))
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

// acquireCall is what an acquiring round asks node i: SET NX PX, or the
// fencing or guarded script (their counters go to the returned slice).
func (l *Locker) acquireCall(rkey, fence, value string) (nodeCall, []atomic.Int64) {
	ttl := l.o.ttl
	if fence == "" && l.guarded == nil {
		return func(ctx context.Context, i int) (bool, error) {
			return l.nodes[i].SetNX(ctx, rkey, value, ttl)
		}, nil
	}
	var counters []atomic.Int64 // atomic: a late call may write after the round
	// The scripts' arguments and keys, in one allocation.
	kv := &[8]string{value, l.ttlMillis, l.guardMillis, rkey, fence, rkey, driver.BirthKey, fence}
	args := kv[0:3]
	var fenced, guarded []string
	if fence != "" {
		counters = make([]atomic.Int64, len(l.nodes))
		fenced = kv[3:5]
	}
	if l.guarded != nil {
		guarded = kv[5:8]
		if fence == "" {
			guarded = guarded[:2]
		}
	}
	return func(ctx context.Context, i int) (bool, error) {
		s, keys, a := driver.ScriptAcquireGuarded, guarded, args
		if l.guarded == nil || !l.guarded[i] {
			if fence == "" {
				return l.nodes[i].SetNX(ctx, rkey, value, ttl)
			}
			s, keys, a = driver.ScriptAcquireFenced, fenced, args[:2]
		}
		reply, err := l.eval(ctx, i, s, keys, a)
		if err != nil {
			return false, err
		}
		c, ok := reply.(int64)
		switch {
		case !ok && reply != nil:
			return false, fmt.Errorf("quorumlock: unexpected reply %#v to the %s script", reply, s.Name())
		case c < 0:
			return false, &restartGuardError{Age: time.Duration(-1-c) * time.Millisecond, MinAge: l.guardMin}
		case counters != nil:
			counters[i].Store(c)
		}
		return c > 0, nil
	}, counters
}
