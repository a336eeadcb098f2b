package strategytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/strategies"
)

// Spec describes the strategy under test and the behaviour it claims.
type Spec struct {
	// New returns the strategy under test. It is called once per subtest.
	New func() strategies.Strategy
	// Concurrent claims that all attempts of a round start before any of
	// them must finish (Parallel, FailFast). Otherwise attempts are assumed to
	// run one at a time.
	Concurrent bool
	// StopsAtQuorum claims that the round ends, without waiting for slower
	// attempts, once a quorum has voted.
	StopsAtQuorum bool
	// FailsFast claims that the round ends, without waiting for slower
	// attempts, once more than N - quorum attempts did not vote.
	FailsFast bool
}

// sizes are the node counts every check runs over; the even ones catch
// strategies that wait for a "quorum against" that a 2-2 split never reaches.
var sizes = []int{1, 2, 3, 4, 5, 7}

const timeout = 50 * time.Millisecond

// Run checks the strategy against the contract of strategies.Strategy and
// against the claims of spec. Timing checks run in a testing/synctest bubble,
// so they are exact and take no wall-clock time.
func Run(t *testing.T, spec Spec) {
	t.Helper()
	require.NotNil(t, spec.New, "strategytest: Spec.New is nil")
	checks := []struct {
		name string
		fn   func(*testing.T, Spec, int)
	}{
		{"ResultsMatchAttempts", resultsMatchAttempts},
		{"AllVote", allVote},
		{"NoneVote", noneVote},
		{"EvenSplitResolves", evenSplitResolves},
		{"NoAttemptOutlivesRun", noAttemptOutlivesRun},
		{"CancelledContextStartsNothing", cancelledContextStartsNothing},
		{"CancellationMidRound", cancellationMidRound},
		{"PerAttemptTimeout", perAttemptTimeout},
		{"SlowNodes", slowNodes},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range sizes {
				t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) { c.fn(t, spec, n) })
			}
		})
	}
}

func quorum(n int) int { return n/2 + 1 }

// recorder wraps an attempt function and records what the strategy did.
type recorder struct {
	parent   context.Context // the caller's context, given to Run
	mu       sync.Mutex
	calls    []int // node indexes in call order
	running  atomic.Int32
	finished atomic.Int32
	returned []bool // what each node's attempt returned
	called   []int  // times each node was called
	badCtx   []string
}

func newRecorder(parent context.Context, n int) *recorder {
	return &recorder{parent: parent, returned: make([]bool, n), called: make([]int, n)}
}

func (r *recorder) wrap(n int, timeout time.Duration, fn func(ctx context.Context, node int) bool) strategies.Attempt {
	return func(ctx context.Context, node int) bool {
		r.running.Add(1)
		defer r.running.Add(-1)
		r.mu.Lock()
		if node < 0 || node >= n {
			r.badCtx = append(r.badCtx, fmt.Sprintf("node index %d out of range", node))
			r.mu.Unlock()
			return false
		}
		r.calls = append(r.calls, node)
		r.called[node]++
		if r.parent.Err() != nil {
			r.badCtx = append(r.badCtx, fmt.Sprintf("node %d started after the caller's context was done", node))
		}
		if timeout > 0 {
			dl, ok := ctx.Deadline()
			if !ok {
				r.badCtx = append(r.badCtx, fmt.Sprintf("node %d got no deadline", node))
			} else if left := time.Until(dl); left > timeout {
				r.badCtx = append(r.badCtx, fmt.Sprintf("node %d got %v, more than the %v per-attempt timeout", node, left, timeout))
			}
		}
		r.mu.Unlock()
		won := fn(ctx, node)
		r.mu.Lock()
		r.returned[node] = won
		r.mu.Unlock()
		r.finished.Add(1)
		return won
	}
}

// check asserts the invariants that hold for every round of every strategy.
func (r *recorder) check(t *testing.T, results []strategies.Result) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Empty(t, r.badCtx)
	assert.Zero(t, r.running.Load(), "an attempt was still running when Run returned")
	assert.EqualValues(t, len(r.calls), r.finished.Load(), "attempts started and finished differ")
	for i, res := range results {
		assert.LessOrEqual(t, r.called[i], 1, "node %d attempted twice in one round", i)
		switch {
		case r.called[i] == 0:
			assert.Equal(t, strategies.NotTried, res, "node %d was never attempted", i)
		case r.returned[i]:
			assert.Equal(t, strategies.Won, res, "node %d voted but is reported %v", i, res)
		default:
			assert.Equal(t, strategies.Lost, res, "node %d did not vote but is reported %v", i, res)
		}
	}
}

func run(s strategies.Strategy, ctx context.Context, n int, timeout time.Duration, a strategies.Attempt) []strategies.Result {
	results := make([]strategies.Result, n)
	s.Run(ctx, strategies.Round{Nodes: n, Quorum: quorum(n), Timeout: timeout, Attempt: a}, results)
	return results
}

func resultsMatchAttempts(t *testing.T, spec Spec, n int) {
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, uint64(n)))
		votes := make([]bool, n)
		for i := range votes {
			votes[i] = rng.IntN(2) == 0
		}
		rec := newRecorder(t.Context(), n)
		results := run(spec.New(), t.Context(), n, timeout, rec.wrap(n, timeout, func(_ context.Context, node int) bool {
			return votes[node]
		}))
		rec.check(t, results)
	}
}

func allVote(t *testing.T, spec Spec, n int) {
	rec := newRecorder(t.Context(), n)
	results := run(spec.New(), t.Context(), n, timeout, rec.wrap(n, timeout, func(context.Context, int) bool { return true }))
	rec.check(t, results)
	won, _, _ := strategies.Count(results)
	assert.GreaterOrEqual(t, won, quorum(n), "every node would vote, yet the round has no quorum")
	switch {
	case !spec.StopsAtQuorum:
		assert.Equal(t, n, won, "a greedy strategy asks every node")
	case !spec.Concurrent:
		assert.Equal(t, quorum(n), won, "a one-at-a-time strategy that stops at quorum asks exactly a quorum")
	}
}

func noneVote(t *testing.T, spec Spec, n int) {
	rec := newRecorder(t.Context(), n)
	results := run(spec.New(), t.Context(), n, timeout, rec.wrap(n, timeout, func(context.Context, int) bool { return false }))
	rec.check(t, results)
	won, lost, _ := strategies.Count(results)
	assert.Zero(t, won)
	if spec.FailsFast {
		assert.GreaterOrEqual(t, lost, n-quorum(n)+1, "fewer refusals than it takes to make quorum impossible")
	} else {
		assert.Equal(t, n, lost, "every node should have been asked")
	}
}

func evenSplitResolves(t *testing.T, spec Spec, n int) {
	// The first half of the nodes vote and the rest refuse: with an even N
	// neither side reaches a quorum, and the round must still end.
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t.Context(), n)
		results := run(spec.New(), t.Context(), n, timeout, rec.wrap(n, timeout, func(_ context.Context, node int) bool {
			return node < n/2
		}))
		rec.check(t, results)
		won, _, _ := strategies.Count(results)
		assert.Less(t, won, quorum(n))
	})
}

func noAttemptOutlivesRun(t *testing.T, spec Spec, n int) {
	// Attempts take different times and the slow ones ignore cancellation
	// for a while: Run must still wait for all of them.
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t.Context(), n)
		results := run(spec.New(), t.Context(), n, timeout, rec.wrap(n, timeout, func(_ context.Context, node int) bool {
			time.Sleep(time.Duration(node%3) * time.Millisecond)
			return node%2 == 0
		}))
		rec.check(t, results)
	})
}

func cancelledContextStartsNothing(t *testing.T, spec Spec, n int) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rec := newRecorder(ctx, n)
	results := run(spec.New(), ctx, n, timeout, rec.wrap(n, timeout, func(context.Context, int) bool { return true }))
	rec.check(t, results)
	assert.Empty(t, rec.calls, "attempts were started with a cancelled context")
}

func cancellationMidRound(t *testing.T, spec Spec, n int) {
	// Every attempt blocks until its context ends; the caller cancels after
	// 10 ms, long before the 50 ms per-attempt timeout.
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(10*time.Millisecond, cancel)
		rec := newRecorder(ctx, n)
		start := time.Now()
		results := run(spec.New(), ctx, n, timeout, rec.wrap(n, timeout, func(ctx context.Context, _ int) bool {
			<-ctx.Done()
			return false
		}))
		rec.check(t, results)
		assert.Equal(t, 10*time.Millisecond, time.Since(start), "Run did not return when its context was cancelled")
		won, _, _ := strategies.Count(results)
		assert.Zero(t, won)
	})
}

func perAttemptTimeout(t *testing.T, spec Spec, n int) {
	// Every attempt hangs until its context ends: only the per-attempt
	// timeout ends the round.
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t.Context(), n)
		start := time.Now()
		results := run(spec.New(), t.Context(), n, timeout, rec.wrap(n, timeout, func(ctx context.Context, _ int) bool {
			<-ctx.Done()
			return false
		}))
		elapsed := time.Since(start)
		rec.check(t, results)
		switch {
		case spec.Concurrent:
			assert.Equal(t, timeout, elapsed, "concurrent attempts share one timeout")
		case spec.FailsFast:
			assert.LessOrEqual(t, elapsed, time.Duration(n)*timeout)
		default:
			assert.Equal(t, time.Duration(n)*timeout, elapsed, "each of %d attempts should time out after %v", n, timeout)
		}
	})
}

func slowNodes(t *testing.T, spec Spec, n int) {
	if n < 3 {
		return // needs fast voters, fast refusers and slow nodes at once
	}
	t.Run("QuorumFirst", func(t *testing.T) { quorumFirst(t, spec, n) })
	t.Run("QuorumImpossibleFirst", func(t *testing.T) { quorumImpossibleFirst(t, spec, n) })
}

// quorumFirst: a quorum votes at once; the other nodes are slow and would
// also vote.
func quorumFirst(t *testing.T, spec Spec, n int) {
	q := quorum(n)
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t.Context(), n)
		start := time.Now()
		results := run(spec.New(), t.Context(), n, timeout, rec.wrap(n, timeout, func(ctx context.Context, node int) bool {
			if node < q {
				return true
			}
			select {
			case <-ctx.Done():
				return false
			case <-time.After(timeout / 2):
				return true
			}
		}))
		elapsed := time.Since(start)
		rec.check(t, results)
		won, _, _ := strategies.Count(results)
		assert.GreaterOrEqual(t, won, q)
		switch {
		case spec.StopsAtQuorum:
			assert.Zero(t, elapsed, "the round should end once a quorum voted")
		case spec.Concurrent:
			assert.Equal(t, timeout/2, elapsed, "a greedy strategy waits for the slow nodes")
			assert.Equal(t, n, won)
		default:
			assert.Equal(t, time.Duration(n-q)*timeout/2, elapsed)
			assert.Equal(t, n, won)
		}
	})
}

// quorumImpossibleFirst: N - quorum + 1 nodes refuse at once; the others
// hang.
func quorumImpossibleFirst(t *testing.T, spec Spec, n int) {
	refusers := n - quorum(n) + 1
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t.Context(), n)
		start := time.Now()
		results := run(spec.New(), t.Context(), n, timeout, rec.wrap(n, timeout, func(ctx context.Context, node int) bool {
			if node < refusers {
				return false
			}
			<-ctx.Done()
			return false
		}))
		elapsed := time.Since(start)
		rec.check(t, results)
		won, _, _ := strategies.Count(results)
		assert.Zero(t, won)
		switch {
		case spec.FailsFast:
			assert.Zero(t, elapsed, "the round should end once quorum became impossible")
		case spec.Concurrent:
			assert.Equal(t, timeout, elapsed, "a strategy that does not fail fast waits for every node")
		default:
			assert.Equal(t, time.Duration(n-refusers)*timeout, elapsed)
		}
	})
}
