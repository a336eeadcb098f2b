package core

import (
	"context"
	"errors"
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
	timeout := l.o.nodeTimeout
	s.Run(ctx, strategies.Round{
		Nodes:   n,
		Quorum:  l.o.quorum,
		Timeout: timeout,
		Attempt: func(actx context.Context, i int) bool {
			start := l.o.clock.Now()
			ok, err := call(actx, i)
			res := &results[i]
			res.Latency = l.o.clock.Now().Sub(start)
			// A call the caller or the strategy cut off is no node failure.
			cut := ctx.Err() != nil || errors.Is(actx.Err(), context.Canceled)
			res.Outcome, res.Err = l.outcome(i, ok, err, cut, actx.Err() != nil, timeout)
			return res.Outcome == OutcomeOK
		},
	}, votes)
	for i := range results {
		results[i].Index = i
		results[i].Node = l.names[i]
	}
	return results
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
	case timedOut || node.Classify(err) == KindContext:
		return OutcomeFailed, timeoutError(timeout, node, err)
	default:
		return OutcomeFailed, err
	}
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
	if n.Classify(err) == KindContext || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
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
// cancellation and deadline. The nodes are asked in parallel, each call
// bounded by the node timeout, so one node timeout bounds the whole
// clean-up; the context itself ends a node timeout later, only as a
// backstop: were it to end with the calls, a node that timed out would
// count as cut off by the caller instead of failed.
func (l *Locker) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 2*l.o.nodeTimeout)
}

// releaseAll asks every node to delete key if it holds value, and, with
// notify, to publish a release notice when it does.
func (l *Locker) releaseAll(ctx context.Context, key, value string, notify bool) []NodeResult {
	keys, args := []string{key}, []string{value}
	if notify {
		args = []string{value, ReleaseChannel(key)}
	}
	return l.round(ctx, releaseStrategy, func(ctx context.Context, i int) (bool, error) {
		return l.scriptVote(ctx, i, ScriptRelease, keys, args)
	})
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
