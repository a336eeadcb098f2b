package strategies

import (
	"context"
	"errors"
)

// errRoundTimeout is the cause of a concurrent round's shared deadline.
var errRoundTimeout = errors.New("strategies: round timeout")

// Parallel returns the strategy the Redlock specification calls multiplexing:
// every node's attempt starts at once, so a round takes as long as its slowest
// attempt (at most Round.Timeout) instead of the sum of them.
//
// By default it waits for every node's answer, whatever the outcome, so the
// caller learns each node's state; with WithStopAtQuorum(true) it cancels
// the attempts still running once a quorum has voted (and waits for them to
// return).
func Parallel(opts ...Option) Strategy {
	return concurrent{config: newConfig(opts), name: "parallel"}
}

// FailFast returns the strategy of Redisson's RedLock: like Parallel, every
// attempt starts at once, but the round ends as soon as the nodes that did not
// vote for the caller make quorum impossible (more than N - quorum of them,
// counting refusals and errors alike). The attempts still running are
// cancelled and waited for, so the caller can release them, and the next
// round starts sooner. This also resolves the split votes of many contenders
// quickly instead of waiting on the slowest node.
//
// With WithStopAtQuorum(true) it also ends the round once a quorum has voted.
func FailFast(opts ...Option) Strategy {
	return concurrent{config: newConfig(opts), name: "failfast", failFast: true}
}

type concurrent struct {
	config
	name     string
	failFast bool
}

func (c concurrent) String() string { return c.name + c.suffix() }

type vote struct {
	node   int
	result Result
}

func (c concurrent) Run(ctx context.Context, r Round, results []Result) {
	if ctx.Err() != nil || r.Nodes <= 0 {
		return
	}
	if r.Nodes == 1 {
		results[0] = Lost
		if runBounded(ctx, r, 0) {
			results[0] = Won
		}
		return
	}
	actx, cancel := ctx, context.CancelFunc(func() {})
	if r.Timeout > 0 {
		actx, cancel = context.WithTimeoutCause(ctx, r.Timeout, errRoundTimeout)
	} else if c.failFast || c.stopAtQuorum {
		actx, cancel = context.WithCancel(ctx)
	}
	defer cancel()

	votes := make(chan vote, r.Nodes)
	for i := 0; i < r.Nodes; i++ {
		go func(i int) {
			var won bool
			switch {
			case actx.Err() == nil:
				won = r.Attempt(actx, i)
			case ctx.Err() != nil || context.Cause(actx) != errRoundTimeout:
				// The caller gave up, or the round was decided before this
				// attempt got going: it is not started.
				votes <- vote{node: i, result: NotTried}
				return
			default:
				// The shared deadline passed before this attempt got
				// going (a process short of CPU): it still runs, under a
				// timeout of its own. Skipped, a release would leave the
				// key on this node until its TTL.
				won = runBounded(ctx, r, i)
			}
			if won {
				votes <- vote{node: i, result: Won}
			} else {
				votes <- vote{node: i, result: Lost}
			}
		}(i)
	}
	won, lost := 0, 0
	maxLost := r.Nodes - r.Quorum
	// Every attempt sends exactly one vote, so receiving N votes is what
	// guarantees that none is still running when Run returns.
	for range r.Nodes {
		v := <-votes
		results[v.node] = v.result
		switch v.result {
		case Won:
			won++
			if c.stopAtQuorum && won == r.Quorum {
				cancel()
			}
		case Lost:
			lost++
			if c.failFast && lost == maxLost+1 {
				cancel()
			}
		}
	}
}
