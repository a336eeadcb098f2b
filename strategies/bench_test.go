package strategies_test

// Micro-benchmarks of the strategies' own cost per round: attempts that
// answer at once, so what is measured is the scheduling (goroutines,
// channels, per-attempt timeout contexts), not any node.
//
//	go test -run '^$' -bench . -benchmem ./strategies/

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/strategies"
)

// benchTimeout is the per-attempt timeout of the benchmarked rounds, so
// that they pay for the timeout contexts as they do under core. It is
// longer than core's default node timeout (50 ms) so that on a loaded
// machine no attempt finds its round timed out before it starts; the cost
// is the same whatever the length.
const benchTimeout = time.Second

// BenchmarkRun measures one round of each built-in strategy (greedy and
// WithStopAtQuorum) over N=1, 3 and 5 nodes whose attempts return at once:
// all voting for the caller (won), or all refusing (lost, where FailFast
// cancels the round).
func BenchmarkRun(b *testing.B) {
	strats := []struct {
		name string
		s    strategies.Strategy
	}{
		{"sequential", strategies.Sequential()},
		{"sequential-stop", strategies.Sequential(strategies.WithStopAtQuorum(true))},
		{"parallel", strategies.Parallel()},
		{"parallel-stop", strategies.Parallel(strategies.WithStopAtQuorum(true))},
		{"failfast", strategies.FailFast()},
		{"failfast-stop", strategies.FailFast(strategies.WithStopAtQuorum(true))},
	}
	for _, st := range strats {
		for _, n := range []int{1, 3, 5} {
			for _, won := range []bool{true, false} {
				name := fmt.Sprintf("%s/N=%d/%s", st.name, n, map[bool]string{true: "won", false: "lost"}[won])
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					r := strategies.Round{
						Nodes:   n,
						Quorum:  n/2 + 1,
						Timeout: benchTimeout,
						Attempt: func(context.Context, int) bool { return won },
					}
					results := make([]strategies.Result, n)
					ctx := b.Context()
					for b.Loop() {
						clear(results)
						st.s.Run(ctx, r, results)
					}
				})
			}
		}
	}
}

// BenchmarkCount measures tallying the results of a five-node round.
func BenchmarkCount(b *testing.B) {
	b.ReportAllocs()
	results := []strategies.Result{strategies.Won, strategies.Lost, strategies.Won, strategies.NotTried, strategies.Won}
	for b.Loop() {
		strategies.Count(results)
	}
}
