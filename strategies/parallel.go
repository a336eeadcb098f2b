package strategies

import (
	"context"
	"errors"
	"time"
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
	actx, cancel := c.roundContext(ctx, r.Timeout)
	defer cancel()

	votes := make(chan vote, r.Nodes)
	// Without an early cut, the last node's attempt runs on this goroutine:
	// one goroutine fewer per round, and the votes are only read after.
	spawned := r.Nodes
	if !c.failFast && !c.stopAtQuorum {
		spawned--
	}
	for i := 0; i < spawned; i++ {
		go func(i int) { votes <- vote{node: i, result: attemptVote(ctx, actx, r, i)} }(i)
	}
	if spawned < r.Nodes {
		votes <- vote{node: spawned, result: attemptVote(ctx, actx, r, spawned)}
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

// roundContext returns the context of a round's attempts: bounded by the
// round's timeout, and cancellable when the strategy may cut it short.
func (c concurrent) roundContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	switch {
	case timeout > 0:
		return context.WithTimeoutCause(ctx, timeout, errRoundTimeout)
	case c.failFast || c.stopAtQuorum:
		return context.WithCancel(ctx)
	}
	return ctx, func() {}
}

// attemptVote runs node i's attempt under actx, the round's context, and
// returns its vote.
func attemptVote(ctx, actx context.Context, r Round, i int) Result {
	var won bool
	switch {
	case actx.Err() == nil:
		won = r.Attempt(actx, i)
	case ctx.Err() != nil || context.Cause(actx) != errRoundTimeout:
		// The caller gave up, or the round was decided before this
		// attempt got going: it is not started.
		return NotTried
	default:
		// The shared deadline passed before this attempt got going (a
		// process short of CPU): it still runs, under a timeout of its
		// own. Skipped, a release would leave the key on this node until
		// its TTL.
		won = runBounded(ctx, r, i)
	}
	if won {
		return Won
	}
	return Lost
}
