package strategies_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/strategies"
	"github.com/quorumlock/quorumlock/strategies/strategytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	specs := []struct {
		name string
		spec strategytest.Spec
	}{
		{"Sequential", strategytest.Spec{New: func() strategies.Strategy { return strategies.Sequential() }}},
		{"Sequential/WithStopAtQuorum", strategytest.Spec{
			New:           func() strategies.Strategy { return strategies.Sequential(strategies.WithStopAtQuorum(true)) },
			StopsAtQuorum: true,
		}},
		{"Parallel", strategytest.Spec{New: func() strategies.Strategy { return strategies.Parallel() }, Concurrent: true}},
		{"Parallel/WithStopAtQuorum", strategytest.Spec{
			New:        func() strategies.Strategy { return strategies.Parallel(strategies.WithStopAtQuorum(true)) },
			Concurrent: true, StopsAtQuorum: true,
		}},
		{"FailFast", strategytest.Spec{New: func() strategies.Strategy { return strategies.FailFast() }, Concurrent: true, FailsFast: true}},
		{"FailFast/WithStopAtQuorum", strategytest.Spec{
			New:        func() strategies.Strategy { return strategies.FailFast(strategies.WithStopAtQuorum(true)) },
			Concurrent: true, FailsFast: true, StopsAtQuorum: true,
		}},
	}
	for _, s := range specs {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			strategytest.Run(t, s.spec)
		})
	}
}

func TestSequentialOrderAndOwnTimeouts(t *testing.T) {
	// Node 1 hangs: it costs exactly one per-attempt timeout, and the nodes
	// are visited in index order, one at a time.
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			order   []int
			started []time.Duration
		)
		begin := time.Now()
		results := make([]strategies.Result, 4)
		strategies.Sequential().Run(t.Context(), strategies.Round{
			Nodes: 4, Quorum: 3, Timeout: 20 * time.Millisecond,
			Attempt: func(ctx context.Context, node int) bool {
				mu.Lock()
				order = append(order, node)
				started = append(started, time.Since(begin))
				mu.Unlock()
				if node == 1 {
					<-ctx.Done()
					return false
				}
				time.Sleep(time.Millisecond)
				return true
			},
		}, results)
		assert.Equal(t, []int{0, 1, 2, 3}, order)
		assert.Equal(t, []time.Duration{0, 1 * time.Millisecond, 21 * time.Millisecond, 22 * time.Millisecond}, started)
		assert.Equal(t, []strategies.Result{strategies.Won, strategies.Lost, strategies.Won, strategies.Won}, results)
	})
}

func TestConcurrentStartsEveryAttemptAtOnce(t *testing.T) {
	for _, s := range []strategies.Strategy{strategies.Parallel(), strategies.FailFast()} {
		t.Run(s.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 5
				var wg sync.WaitGroup
				wg.Add(n)
				all := make(chan struct{})
				go func() { wg.Wait(); close(all) }()
				results := make([]strategies.Result, n)
				s.Run(t.Context(), strategies.Round{
					Nodes: n, Quorum: 3, Timeout: time.Second,
					Attempt: func(ctx context.Context, _ int) bool {
						wg.Done()
						select { // every attempt waits for all the others to start
						case <-all:
							return true
						case <-ctx.Done():
							return false
						}
					},
				}, results)
				won, _, _ := strategies.Count(results)
				assert.Equal(t, n, won, "some attempt had to wait for another to finish before it started")
			})
		})
	}
}

func TestFailFastCountsErrorsAndRefusalsAlike(t *testing.T) {
	// N=5, quorum 3: one node refuses, one fails, a third refuses: that is
	// N - quorum + 1 = 3 non-votes, and the two hanging nodes are cancelled.
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		results := make([]strategies.Result, 5)
		strategies.FailFast().Run(t.Context(), strategies.Round{
			Nodes: 5, Quorum: 3, Timeout: time.Second,
			Attempt: func(ctx context.Context, node int) bool {
				if node < 3 {
					time.Sleep(time.Duration(node) * time.Millisecond)
					return false
				}
				<-ctx.Done()
				return false
			},
		}, results)
		assert.Equal(t, 2*time.Millisecond, time.Since(start))
	})
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "sequential", strategies.Sequential().String())
	assert.Equal(t, "parallel(stop-at-quorum)", strategies.Parallel(strategies.WithStopAtQuorum(true)).String())
	assert.Equal(t, "failfast", strategies.FailFast().String())
	assert.Equal(t, "WithStopAtQuorum(true)", strategies.WithStopAtQuorum(true).String())
	assert.Equal(t, "WithStopAtQuorum(false)", strategies.WithStopAtQuorum(false).String())
	// A later option overrides an earlier one; a nil Option is skipped.
	assert.Equal(t, "parallel", strategies.Parallel(strategies.WithStopAtQuorum(true), nil, strategies.WithStopAtQuorum(false)).String())
	assert.Equal(t, "sequential(stop-at-quorum)", strategies.Sequential(nil, strategies.WithStopAtQuorum(true)).String())
	assert.Equal(t, "won", strategies.Won.String())
	assert.Equal(t, "lost", strategies.Lost.String())
	assert.Equal(t, "not-tried", strategies.NotTried.String())
}

// TestStarvedAttemptsRun checks that a concurrent round whose shared
// deadline passed before some attempts got going (a process short of CPU;
// here a deadline of a nanosecond) still runs every attempt, each under a
// timeout of its own, rather than skipping it: the core sends its releases
// in such rounds, and a skipped release leaves the key until its TTL.
func TestStarvedAttemptsRun(t *testing.T) {
	const n = 16
	for _, s := range []strategies.Strategy{strategies.Parallel(), strategies.Parallel(strategies.WithStopAtQuorum(true))} {
		t.Run(s.String(), func(t *testing.T) {
			var mu sync.Mutex
			called := make(map[int]bool)
			results := make([]strategies.Result, n)
			s.Run(t.Context(), strategies.Round{Nodes: n, Quorum: n/2 + 1, Timeout: time.Nanosecond, Attempt: func(ctx context.Context, node int) bool {
				_, bounded := ctx.Deadline()
				mu.Lock()
				defer mu.Unlock()
				called[node] = bounded
				return false
			}}, results)
			for i := range n {
				bounded, ok := called[i]
				assert.True(t, ok, "node %d was not attempted", i)
				assert.True(t, bounded, "node %d's attempt had no deadline", i)
				assert.Equal(t, strategies.Lost, results[i], "node %d", i)
			}
		})
	}
	t.Run("a round the caller gave up starts nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		results := make([]strategies.Result, n)
		strategies.Parallel().Run(ctx, strategies.Round{Nodes: n, Quorum: n/2 + 1, Timeout: time.Nanosecond, Attempt: func(context.Context, int) bool {
			t.Error("attempted after the caller's context ended")
			return false
		}}, results)
		for i := range n {
			assert.Equal(t, strategies.NotTried, results[i])
		}
	})
}
