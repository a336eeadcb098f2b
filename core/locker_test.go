package core_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

func TestNewRefusesBadInput(t *testing.T) {
	three := func() []core.Node { return memory.AsNodes(memory.NewNodes(3)) }
	cases := []struct {
		name  string
		nodes []core.Node
		opts  []core.Option
		msg   string
	}{
		{"no nodes", nil, nil, "no nodes"},
		{"nil node", []core.Node{memory.New(), nil}, nil, "node 1 is nil"},
		{"typed nil node", []core.Node{memory.New(), (*memory.Node)(nil)}, nil, "node 1 is nil"},
		{"same node twice", func() []core.Node { n := memory.New(); return []core.Node{n, memory.New(), n} }(), nil, "counted twice"},
		{"same name twice", []core.Node{memory.New(memory.WithName("a")), memory.New(memory.WithName("a"))}, nil, `both "a"`},
		{"zero TTL", three(), []core.Option{core.WithTTL(0)}, "TTL 0s must be at least 1ms"},
		{"negative TTL", three(), []core.Option{core.WithTTL(-time.Second)}, "must be at least 1ms"},
		{"TTL under the drift", three(), []core.Option{core.WithTTL(2 * time.Millisecond)}, "leaves no validity"},
		{"quorum too small", three(), []core.Option{core.WithQuorum(1)}, "quorum 1 is impossible for 3 nodes"},
		{"quorum zero", three(), []core.Option{core.WithQuorum(0)}, "quorum 0 is impossible"},
		{"quorum too large", three(), []core.Option{core.WithQuorum(4)}, "quorum 4 is impossible"},
		{"zero tries", three(), []core.Option{core.WithTries(0)}, "tries 0 must be at least 1"},
		{"negative drift", three(), []core.Option{core.WithDriftFactor(-0.1)}, "drift factor"},
		{"drift of one", three(), []core.Option{core.WithDriftFactor(1)}, "drift factor"},
		{"NaN drift", three(), []core.Option{core.WithDriftFactor(math.NaN())}, "drift factor"},
		{"zero node timeout", three(), []core.Option{core.WithNodeTimeout(0)}, "node timeout 0s must be positive"},
		{"node timeout over the TTL", three(), []core.Option{core.WithTTL(time.Second), core.WithNodeTimeout(time.Second)}, "must be less than TTL - drift"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := core.New(c.nodes, c.opts...)
			assert.Nil(t, l)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}

func TestDefaults(t *testing.T) {
	l, _ := newLocker(t, 5)
	assert.Equal(t, core.DefaultTTL, l.TTL())
	assert.Equal(t, 3, l.Quorum())
	assert.Equal(t, 102*time.Millisecond, l.Drift(), "10 s x 0.01 + 2 ms")
	assert.Contains(t, l.String(), "strategy=parallel ")

	l2, _ := newLocker(t, 3, core.WithTTL(1500*time.Millisecond+999*time.Microsecond))
	assert.Equal(t, 1500*time.Millisecond, l2.TTL(), "the TTL is whole milliseconds")
}

func TestOptionStrings(t *testing.T) {
	assert.Equal(t, "WithTTL(5s)", core.WithTTL(5*time.Second).String())
	assert.Equal(t, "WithQuorum(3)", core.WithQuorum(3).String())
	assert.Equal(t, "WithStrategy(failfast)", core.WithStrategy(strategies.FailFast()).String())
	assert.Equal(t, "WithKeyPrefix(\"app:\")", core.WithKeyPrefix("app:").String())
	assert.Equal(t, "WithDriftFactor(0.05)", core.WithDriftFactor(0.05).String())
}

func TestBadCallInput(t *testing.T) {
	l, _ := newLocker(t, 3)
	_, err := l.TryAcquire(t.Context(), "")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err = l.Acquire(nil, "k") //nolint:staticcheck
	require.ErrorIs(t, err, core.ErrInvalidArgument)

	var nilLock *core.Lock
	require.ErrorIs(t, nilLock.Release(t.Context()), core.ErrNotHeld)
	require.ErrorIs(t, nilLock.Extend(t.Context()), core.ErrNotHeld)
	assert.Zero(t, nilLock.Validity())
	assert.Empty(t, nilLock.Key())
}

func TestKeyPrefix(t *testing.T) {
	l, nodes := newLocker(t, 3, core.WithKeyPrefix("locks:"))
	lock, err := l.TryAcquire(t.Context(), "orders:42")
	require.NoError(t, err)
	assert.Equal(t, "orders:42", lock.Key())
	assert.Equal(t, []string{"locks:orders:42"}, nodes[0].Keys())
	require.NoError(t, lock.Release(t.Context()))
	assert.Empty(t, nodes[0].Keys())
}

func TestLongAndUnicodeKeys(t *testing.T) {
	l, nodes := newLocker(t, 3)
	for _, key := range []string{strings.Repeat("k", 1<<16), "заказ:42:🔒", "{tag}:x", "a b\x00c"} {
		lock, err := l.TryAcquire(t.Context(), key)
		require.NoError(t, err)
		v, _, ok := nodes[1].Get(key)
		require.True(t, ok)
		assert.Equal(t, lock.Value(), v)
		_, err = l.TryAcquire(t.Context(), key)
		require.ErrorIs(t, err, core.ErrNotAcquired)
		require.NoError(t, lock.Release(t.Context()))
	}
}

func TestReleaseSemantics(t *testing.T) {
	t.Run("twice", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		require.NoError(t, lock.Release(t.Context()))
		calls := nodes[0].Calls()
		require.NoError(t, lock.Release(t.Context()))
		assert.Equal(t, calls, nodes[0].Calls(), "a second release must not reach the nodes")
		assert.Zero(t, lock.Validity())
		require.ErrorIs(t, lock.Extend(t.Context()), core.ErrNotHeld)
	})
	t.Run("with a cancelled context", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.NoError(t, lock.Release(ctx))
		assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
	})
	t.Run("taken over", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		for _, n := range nodes[:2] {
			n.Set("k", "rival", time.Minute)
		}
		err = lock.Release(t.Context())
		require.ErrorIs(t, err, core.ErrNotHeld)
		v, _, _ := nodes[0].Get("k")
		assert.Equal(t, "rival", v, "release must not delete another owner's key")
		assert.Empty(t, nodes[2].Keys(), "release still clears the nodes it holds")
	})
	t.Run("outage", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		nodes[0].Stop()
		nodes[1].Stop()
		err = lock.Release(t.Context())
		require.ErrorIs(t, err, core.ErrUnavailable)
		assert.NotErrorIs(t, err, core.ErrNotHeld)
		nodes[0].StartKeepingData()
		nodes[1].StartKeepingData()
		require.NoError(t, lock.Release(t.Context()), "tried again")
	})
}

func TestNoScriptRecovery(t *testing.T) {
	l, nodes := newLocker(t, 3)
	lock, err := l.TryAcquire(t.Context(), "k")
	require.NoError(t, err)
	require.NoError(t, lock.Extend(t.Context()))
	for _, n := range nodes {
		n.FlushScripts()
	}
	before := nodes[0].Calls()
	require.NoError(t, lock.Extend(t.Context()), "EVALSHA after SCRIPT FLUSH must fall back to EVAL")
	after := nodes[0].Calls()
	assert.Equal(t, 1, after.EvalSHA-before.EvalSHA)
	assert.Equal(t, 1, after.Eval-before.Eval)
	require.NoError(t, lock.Extend(t.Context()))
	assert.Equal(t, after.Eval, nodes[0].Calls().Eval, "once reloaded, the script runs by SHA again")
	require.NoError(t, lock.Release(t.Context()))
	assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
}

func TestMutualExclusion(t *testing.T) {
	// 32 goroutines each increment a shared counter 50 times with a
	// non-atomic read-modify-write under the lock: any overlap loses updates.
	// (The conformance suite runs the full 32 x 200 against every backend.)
	// Not parallel: contention tests that share two cores slow each other's
	// rounds, which makes more split votes and yet more rounds.
	const goroutines, increments = 32, 50
	for _, s := range allStrategies() {
		t.Run(s.String(), func(t *testing.T) {
			l, _ := newLocker(t, 5, core.WithStrategy(s), core.WithNodeTimeout(time.Second),
				core.WithTries(1_000_000), core.WithRetryDelay(strategies.JitterDelay(0, time.Millisecond)))
			var (
				counter int
				inside  int32
				mu      sync.Mutex // guards inside only, to detect overlap
				wg      sync.WaitGroup
				overlap bool
			)
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < increments; i++ {
						lock, err := l.Acquire(context.Background(), "counter")
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						inside++
						overlap = overlap || inside > 1
						mu.Unlock()
						v := counter
						if i%7 == 0 {
							time.Sleep(0) // yield inside the critical section
						}
						counter = v + 1
						mu.Lock()
						inside--
						mu.Unlock()
						assert.NoError(t, lock.Release(context.Background()))
					}
				}()
			}
			wg.Wait()
			assert.False(t, overlap)
			assert.Equal(t, goroutines*increments, counter)
		})
	}
}

func TestClose(t *testing.T) {
	t.Run("releases held locks and refuses new work", func(t *testing.T) {
		nodes := memory.NewNodes(3)
		l, err := core.New(memory.AsNodes(nodes))
		require.NoError(t, err)
		a, err := l.TryAcquire(t.Context(), "a")
		require.NoError(t, err)
		b, err := l.TryAcquire(t.Context(), "b")
		require.NoError(t, err)
		require.NoError(t, b.Release(t.Context()))
		require.NoError(t, l.Close())
		require.NoError(t, l.Close(), "Close is idempotent")

		for _, n := range nodes {
			assert.Empty(t, n.Keys())
			_, err := n.SetNX(t.Context(), "x", "y", time.Second)
			assert.ErrorIs(t, err, memory.ErrClosed, "Close closes the nodes")
		}
		_, err = l.Acquire(t.Context(), "c")
		require.ErrorIs(t, err, core.ErrClosed)
		require.NoError(t, a.Release(t.Context()), "Close already released it")
		require.ErrorIs(t, a.Extend(t.Context()), core.ErrClosed)
		assert.Zero(t, a.Validity())
	})
	t.Run("ends an Acquire waiting to retry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := memory.NewNodes(3)
			for _, n := range nodes {
				n.Set("k", "rival", time.Hour)
			}
			l, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(time.Minute, time.Minute)))
			require.NoError(t, err)
			done := make(chan error)
			go func() {
				_, err := l.Acquire(context.Background(), "k")
				done <- err
			}()
			synctest.Wait() // Acquire is now waiting for its retry
			start := time.Now()
			require.NoError(t, l.Close())
			err = <-done
			assert.Zero(t, time.Since(start))
			require.ErrorIs(t, err, core.ErrClosed)
			require.ErrorIs(t, err, core.ErrNotAcquired, "the last round's outcome is kept")
		})
	})
}

func TestQuorumErrorReport(t *testing.T) {
	nodes := []*memory.Node{memory.New(memory.WithName("n0")), memory.New(memory.WithName("n1")), memory.New(memory.WithName("n2"))}
	l, err := core.New(memory.AsNodes(nodes))
	require.NoError(t, err)
	defer l.Close()
	nodes[0].Set("k", "rival", time.Minute)
	nodes[1].Stop()
	_, err = l.TryAcquire(t.Context(), "k")
	require.ErrorIs(t, err, core.ErrNotAcquired, "1 failure of 3 leaves a quorum possible: contention, not outage")
	var qe *core.QuorumError
	require.True(t, errors.As(err, &qe))
	assert.Equal(t, core.OpAcquire, qe.Op)
	assert.Equal(t, "k", qe.Key)
	assert.Equal(t, 2, qe.Quorum)
	assert.Equal(t, []core.Outcome{core.OutcomeRefused, core.OutcomeFailed, core.OutcomeOK}, outcomes(qe))
	assert.ErrorIs(t, qe.Nodes[1].Err, memory.ErrDown)
	require.ErrorIs(t, err, memory.ErrDown, "node errors are reachable through the QuorumError")
	msg := err.Error()
	for _, want := range []string{`acquire "k"`, "lock held by another owner", "1 of 3 nodes ok, 1 refused, 1 failed, quorum 2", "0 n0 refused", "1 n1 failed", "memory: node is down", "2 n2 ok"} {
		assert.Contains(t, msg, want)
	}

	nodes[2].Stop()
	_, err = l.TryAcquire(t.Context(), "k")
	require.ErrorIs(t, err, core.ErrUnavailable, "2 failures of 3 make quorum impossible: outage")
	assert.NotErrorIs(t, err, core.ErrNotAcquired)
}

func TestCancelledBeforeStart(t *testing.T) {
	l, nodes := newLocker(t, 3)
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("shutting down"))
	_, err := l.Acquire(ctx, "k")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	assert.Contains(t, err.Error(), "shutting down")
	assert.Zero(t, nodes[0].Calls().Acquires, "no node is asked once the context has ended")

	lock, err := l.TryAcquire(t.Context(), "k")
	require.NoError(t, err)
	err = lock.Extend(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Positive(t, lock.Validity(), "an interrupted extension does not lose the lock")
	require.NoError(t, lock.Release(ctx), "release runs even with an ended context")
}

// failOnce fails its first script call once armed (failed set to false)
// without running it, as a pooled connection to a server that restarted
// since its last use does.
type failOnce struct {
	*memory.Node
	failed atomic.Bool
}

var errStale = errors.New("EOF")

func (f *failOnce) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	if f.failed.CompareAndSwap(false, true) {
		return nil, errStale
	}
	return f.Node.EvalSHA(ctx, sha, keys, args)
}

func (f *failOnce) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	if f.failed.CompareAndSwap(false, true) {
		return nil, errStale
	}
	return f.Node.Eval(ctx, script, keys, args)
}

// Release and extend are idempotent: a node failure with time left is
// retried once, so a stale connection does not fail them.
func TestScriptRetryAfterNodeFailure(t *testing.T) {
	ctx := t.Context()
	for _, op := range []string{"release", "extend"} {
		t.Run(op, func(t *testing.T) {
			mem := memory.New()
			node := &failOnce{Node: mem}
			node.failed.Store(true) // not before the acquisition's identity check
			l, err := core.New([]core.Node{node})
			require.NoError(t, err)
			defer l.Close()
			lock, err := l.TryAcquire(ctx, "k")
			require.NoError(t, err)
			node.failed.Store(false)
			if op == "release" {
				require.NoError(t, lock.Release(ctx))
				assert.Empty(t, mem.Keys(), "the retried release deleted the key")
			} else {
				require.NoError(t, lock.Extend(ctx))
				assert.Positive(t, lock.Validity())
			}
			assert.True(t, node.failed.Load(), "the first call failed")
		})
	}
}

// A retry that does not confirm reports the first failure: the first
// release may have deleted the key before its reply was lost, so the
// retry's 0 does not mean that someone else holds the lock.
func TestScriptRetryKeepsFirstFailure(t *testing.T) {
	ctx := t.Context()
	l, nodes := newLocker(t, 1)
	lock, err := l.TryAcquire(ctx, "k")
	require.NoError(t, err)
	before := nodes[0].Calls()
	nodes[0].DropReplies(true)
	err = lock.Release(ctx)
	after := nodes[0].Calls()
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.NotErrorIs(t, err, core.ErrNotHeld)
	qe := quorumError(t, err)
	assert.Equal(t, []core.Outcome{core.OutcomeFailed}, outcomes(qe))
	assert.ErrorIs(t, qe.Nodes[0].Err, memory.ErrReplyLost)
	assert.Equal(t, 2, after.EvalSHA+after.Eval-before.EvalSHA-before.Eval, "one release and one retry")
	nodes[0].DropReplies(false)
	assert.Empty(t, nodes[0].Keys(), "the first attempt did delete the key")
}
