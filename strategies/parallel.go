package strategies

import (
	"context"
	"sync"
	"sync/atomic"
)

// Parallel returns the strategy the Redlock specification calls multiplexing:
// every node's attempt starts at once, so a round takes as long as its slowest
// attempt (at most Round.Timeout) instead of the sum of them.
//
// By default it waits for every node's answer, whatever the outcome, so the
// caller learns each node's state; with StopAtQuorum it cancels the attempts
// still running once a quorum has voted (and waits for them to return).
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
// With StopAtQuorum it also ends the round once a quorum has voted.
func FailFast(opts ...Option) Strategy {
	return concurrent{config: newConfig(opts), name: "failfast", failFast: true}
}

type concurrent struct {
	config
	name     string
	failFast bool
}

func (c concurrent) String() string { return c.name + c.suffix() }

// roundState is what a round's attempts share: one allocation per round.
// The attempts share one deadline, set when the round starts.
type roundState struct {
	c       concurrent
	parent  context.Context
	ctx     context.Context
	cancel  context.CancelFunc
	ended   atomic.Bool // the strategy ended the round (quorum won or lost)
	r       Round
	results []Result
	won     atomic.Int32
	lost    atomic.Int32
	wg      sync.WaitGroup
}

func (st *roundState) end() {
	st.ended.Store(true)
	st.cancel()
}

func (st *roundState) attempt(i int) {
	ctx := st.ctx
	if ctx.Err() != nil {
		if st.parent.Err() != nil || st.ended.Load() || st.r.Timeout <= 0 {
			return // NotTried: the caller or the strategy ended the round
		}
		// Only the shared deadline passed, before this attempt even got
		// going (a starved process): it still gets its own node timeout,
		// as Round.Timeout promises, rather than no call at all (which
		// would leave a release undone until the TTL).
		actx, cancel := context.WithTimeout(st.parent, st.r.Timeout)
		defer cancel()
		ctx = actx
	}
	if st.r.Attempt(ctx, i) {
		st.results[i] = Won
		if st.c.stopAtQuorum && int(st.won.Add(1)) == st.r.Quorum {
			st.end()
		}
		return
	}
	st.results[i] = Lost
	if st.c.failFast && int(st.lost.Add(1)) == st.r.Nodes-st.r.Quorum+1 {
		st.end()
	}
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
	st := &roundState{c: c, parent: ctx, ctx: ctx, cancel: func() {}, r: r, results: results}
	if r.Timeout > 0 {
		st.ctx, st.cancel = context.WithTimeout(ctx, r.Timeout)
	} else if c.failFast || c.stopAtQuorum {
		st.ctx, st.cancel = context.WithCancel(ctx)
	}
	defer st.cancel()
	st.wg.Add(r.Nodes - 1)
	for i := 1; i < r.Nodes; i++ {
		go func() {
			defer st.wg.Done()
			st.attempt(i)
		}()
	}
	st.attempt(0)
	st.wg.Wait()
}
