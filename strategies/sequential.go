package strategies

import "context"

// Sequential returns the Redlock specification's strategy: the nodes are tried
// one after the other, in index order, each attempt with its own timeout.
// A slow or dead node costs at most one Round.Timeout.
//
// By default it tries every node, even when quorum can no longer be reached,
// as the specification describes; with WithStopAtQuorum(true) it starts no
// attempt after the quorum-th vote.
func Sequential(opts ...Option) Strategy {
	return sequential{newConfig(opts)}
}

type sequential struct{ config }

func (s sequential) String() string { return "sequential" + s.suffix() }

func (s sequential) Run(ctx context.Context, r Round, results []Result) {
	won := 0
	for i := 0; i < r.Nodes; i++ {
		if ctx.Err() != nil {
			return
		}
		if runBounded(ctx, r, i) {
			results[i] = Won
			won++
			if s.stopAtQuorum && won >= r.Quorum {
				return
			}
		} else {
			results[i] = Lost
		}
	}
}

// runBounded runs one attempt under its own per-attempt timeout.
func runBounded(ctx context.Context, r Round, i int) bool {
	if r.Timeout <= 0 {
		return r.Attempt(ctx, i)
	}
	actx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	return r.Attempt(actx, i)
}
