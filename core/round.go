package core

import (
	"context"
	"errors"
	"github.com/quorumlock/quorumlock/core/driver"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/strategies"
)

// nodeCall is what node i is asked in a round; it reports the node's vote.
type nodeCall func(ctx context.Context, i int) (bool, error)

// releaseStrategy sends releases: to every node at once, waiting for every
// answer, whatever strategy the Locker acquires with (Redlock rule 6).
var releaseStrategy = strategies.Parallel()

// round runs call on the nodes under strategy s and returns every node's
// result. The strategy only orders the calls; the votes are counted here.
func (l *Locker) round(ctx context.Context, s Strategy, call nodeCall) []NodeResult {
	n := len(l.nodes)
	results := make([]NodeResult, n)
	votes := make([]strategies.Result, n)
	s.Run(ctx, strategies.Round{
		Nodes:   n,
		Quorum:  l.o.quorum,
		Timeout: l.o.nodeTimeout,
		Attempt: func(actx context.Context, i int) bool {
			return l.attempt(ctx, actx, i, call, &results[i])
		},
	}, votes)
	for i := range results {
		results[i].Index = i
		results[i].Node = l.names[i]
	}
	return results
}

// attempt asks node i once, under actx (the caller's ctx bounded by the
// node timeout), records the answer in res and reports whether it is a
// vote for.
func (l *Locker) attempt(ctx, actx context.Context, i int, call nodeCall, res *NodeResult) bool {
	start := l.o.clock.Now()
	// One server, one vote: a yes counts only from a node that proved
	// which server it is, and a duplicate's call fails (identity.go).
	ok, err := l.vote(actx, i, call)
	res.Latency = l.o.clock.Now().Sub(start)
	// Only a failed call needs to know why (an answer is an answer): a
	// call the caller or the strategy cut off is no node failure, and a
	// deadline that has passed counts even before its context's timer has
	// fired (a driver's socket deadline, at the same instant, can beat it
	// with a bare i/o timeout).
	var cut, timedOut bool
	if err != nil {
		cut = ctx.Err() != nil || errors.Is(actx.Err(), context.Canceled) || deadlinePassed(ctx)
		timedOut = actx.Err() != nil || deadlinePassed(actx)
	}
	res.Outcome, res.Err = l.outcome(i, ok, err, cut, timedOut, l.o.nodeTimeout)
	return res.Outcome == OutcomeOK
}

// outcome classifies one node's answer to a call bounded by the node
// timeout: cut says the call was cut off from outside (by the caller or
// the strategy), timedOut that its own deadline passed.
func (l *Locker) outcome(i int, ok bool, err error, cut, timedOut bool, timeout time.Duration) (Outcome, error) {
	node := l.nodes[i]
	switch {
	case err == nil && ok:
		return OutcomeOK, nil
	case err == nil:
		return OutcomeRefused, nil
	case cut:
		return OutcomeCanceled, nil
	case timedOut || node.Classify(err) == driver.KindContext:
		return OutcomeFailed, timeoutError(timeout, node, err)
	default:
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

// detached returns a context for clean-up work that must run even when the
// caller's context has ended: it keeps ctx's values and drops its
// cancellation and deadline. Every clean-up runs its calls through
// releaseStrategy, whose per-call node timeout bounds them, so it needs no
// deadline of its own (which would cost a timer per release).
func detached(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx // nothing to drop
	}
	return context.WithoutCancel(ctx)
}

// releaseAll asks every node to delete key if it holds value. With
// notify, the herald also announces the release: it hands the key to the
// oldest waiter in the key's wait queue, if any, and handed reports that
// it did. With prev, the results of an earlier release of the same value,
// the nodes that answered it are not asked again: their answers stand.
func (l *Locker) releaseAll(ctx context.Context, key, value string, notify bool, prev []NodeResult) (results []NodeResult, handed bool) {
	// One allocation: keys are kv[:1] (kv[:2] on the herald), args
	// kv[2:3] (kv[2:4] on the herald).
	st := &struct {
		kv     [4]string
		answer atomic.Int64
	}{kv: [4]string{key, "", value, ""}}
	herald := -1
	if notify {
		herald = l.herald
		st.kv[3] = driver.ReleaseChannel(key)
		if q, ok := driver.QueueKey(key); ok {
			st.kv[1] = q
		}
	}
	results = l.round(ctx, releaseStrategy, func(ctx context.Context, i int) (bool, error) {
		if prev != nil && (prev[i].Outcome == OutcomeOK || prev[i].Outcome == OutcomeRefused) {
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
	})
	return results, st.answer.Load() == 2
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
