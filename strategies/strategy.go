package strategies

import (
	"context"
	"strconv"
	"time"
)

// Attempt runs one node's attempt of a round and reports whether that node
// voted for the caller. It must return soon after ctx is done. The node index
// is in [0, Round.Nodes).
type Attempt func(ctx context.Context, node int) bool

// Result is what a strategy reports for one node of a round.
type Result uint8

const (
	// NotTried means the strategy never called the node's attempt.
	NotTried Result = iota
	// Won means the attempt ran and the node voted for the caller.
	Won
	// Lost means the attempt ran and the node did not vote for the caller:
	// it refused, failed, timed out, or was cancelled by the strategy.
	Lost
)

// String returns "not-tried", "won" or "lost".
func (r Result) String() string {
	switch r {
	case NotTried:
		return "not-tried"
	case Won:
		return "won"
	case Lost:
		return "lost"
	default:
		return "result(" + strconv.Itoa(int(r)) + ")"
	}
}

// Round describes one round of attempts, one per node.
type Round struct {
	// Nodes is the number of nodes, N. It is at least 1.
	Nodes int
	// Quorum is the number of votes that wins the round, in (N/2, N].
	Quorum int
	// Timeout bounds each attempt: the context an attempt receives ends at
	// most Timeout after the attempt started. A value <= 0 means no
	// per-attempt bound beyond the caller's context.
	Timeout time.Duration
	// Attempt runs one node's attempt.
	Attempt Attempt
}

// Strategy decides the order in which a round's attempts run and when the
// round stops. A Strategy must be safe for concurrent use by many rounds.
//
// Run calls r.Attempt for some or all nodes and writes each node's Result
// into results, which has length r.Nodes and holds NotTried on entry.
// Run must not return while any attempt it started is still running: it may
// cancel the context of attempts it no longer needs, but it waits for them.
// It must pass every attempt a context derived from ctx and bounded by
// r.Timeout, start no attempt once ctx is done, and never call the attempt of
// one node twice in a round.
//
// A Strategy does not decide whether the round was won; the caller counts
// the votes it received itself.
type Strategy interface {
	Run(ctx context.Context, r Round, results []Result)
	// String names the strategy and its mode, for logs and errors.
	String() string
}

// Option configures a built-in strategy. Options apply in order, a later
// one overriding an earlier one of the same kind; a nil Option is skipped.
// Its String shows the option as written.
type Option interface {
	apply(*config)
	String() string
}

type config struct {
	stopAtQuorum bool
}

type stopAtQuorumOption bool

func (o stopAtQuorumOption) apply(c *config) { c.stopAtQuorum = bool(o) }
func (o stopAtQuorumOption) String() string {
	return "WithStopAtQuorum(" + strconv.FormatBool(bool(o)) + ")"
}

// WithStopAtQuorum, on, makes a strategy end the round as soon as a quorum
// of nodes has voted for the caller: Sequential starts no further attempt,
// Parallel and FailFast cancel the attempts still running (and wait for
// them). Off, the strategy asks every node. It takes no value that is an
// error.
//
// The built-in strategies are greedy by default and try every node, because
// a lock held on more nodes survives more node crashes, release goes to every
// node anyway, and cancelling an in-flight request usually costs the driver
// its connection.
// Default: off.
func WithStopAtQuorum(on bool) Option { return stopAtQuorumOption(on) }

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

func (c config) suffix() string {
	if c.stopAtQuorum {
		return "(stop-at-quorum)"
	}
	return ""
}

// Count tallies a round's results.
func Count(results []Result) (won, lost, notTried int) {
	for _, r := range results {
		switch r {
		case Won:
			won++
		case Lost:
			lost++
		default:
			notTried++
		}
	}
	return won, lost, notTried
}
