package core_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
)

// These tests run in synctest bubbles: time moves only when every
// goroutine of the bubble is blocked, so a TTL of seconds costs nothing
// and every instant asserted is exact.

func TestKeepAlive(t *testing.T) {
	const ttl = time.Second
	interval := ttl / core.DefaultKeepAliveDivisor
	t.Run("survives many TTLs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			lock := keptAlive(t, l, "k")
			require.NoError(t, lock.KeepAlive(), "a second KeepAlive is a no-op")
			time.Sleep(10 * ttl)
			require.NoError(t, lock.Err())
			assert.Greater(t, lock.Validity(), ttl/2)
			for _, n := range nodes {
				v, left, ok := n.Get("k")
				require.True(t, ok)
				assert.Equal(t, lock.Value(), v)
				assert.Greater(t, left, ttl/2)
			}
			st := l.Stats()
			assert.Equal(t, 1, st.KeptAlive)
			// One extension per interval: 10 s / 333 ms.
			assert.InDelta(t, 30, st.RenewalTicks, 1)
			require.NoError(t, lock.Release(t.Context()))
			assert.Zero(t, l.Stats().KeptAlive)
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
		})
	})
	t.Run("a key taken over is lost at the next extension", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			start := time.Now()
			lock := keptAlive(t, l, "k")
			for _, n := range nodes[:2] {
				n.Set("k", "rival", time.Minute)
			}
			<-lock.Done()
			assert.Equal(t, interval, time.Since(start), "found at the first extension")
			require.ErrorIs(t, lock.Err(), core.ErrLockLost)
			assert.NotErrorIs(t, lock.Err(), core.ErrValidityExpired)
			assert.Equal(t, []core.Outcome{core.OutcomeRefused, core.OutcomeRefused, core.OutcomeOK}, outcomes(quorumError(t, lock.Err())))
			assert.Zero(t, l.Stats().KeptAlive)
			require.ErrorIs(t, lock.Extend(t.Context()), core.ErrLockLost)
			require.ErrorIs(t, lock.Release(t.Context()), core.ErrNotHeld)
		})
	})
	t.Run("a deleted key is lost at the next extension", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 1, core.WithTTL(ttl))
			lock := keptAlive(t, l, "k")
			time.Sleep(interval + interval/2) // one extension has passed
			require.NoError(t, lock.Err())
			nodes[0].Del("k")
			deleted := time.Now()
			<-lock.Done()
			assert.Equal(t, 2*interval-(interval+interval/2), time.Since(deleted), "found at the next extension")
			require.ErrorIs(t, lock.Err(), core.ErrLockLost)
		})
	})
	t.Run("a majority down ends the lock at risk, before its validity", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			lock := keptAlive(t, l, "k")
			time.Sleep(interval + interval/2)
			nodes[0].Stop()
			nodes[1].Stop()
			stopped := time.Now()
			<-lock.Done()
			// The last extension started at 1 interval; its validity is
			// TTL - drift from then, less the at-risk margin.
			margin := ttl / core.DefaultAtRiskDivisor
			assert.Equal(t, interval+ttl-drift(ttl)-margin, time.Since(stopped)+interval+interval/2)
			assert.Equal(t, margin, lock.Validity(), "the time left to stop")
			cause := lock.Err()
			require.ErrorIs(t, cause, core.ErrLockAtRisk)
			require.ErrorIs(t, cause, core.ErrLockLost)
			require.ErrorIs(t, cause, core.ErrUnavailable, "the extensions could not reach a quorum")
			require.NotErrorIs(t, cause, core.ErrValidityExpired)
			require.ErrorIs(t, cause, memory.ErrDown)
			assert.Contains(t, cause.Error(), `lock "k" at risk: its extensions have not reached a quorum, and 200ms of validity is left (at-risk margin 200ms)`)
		})
	})
	t.Run("a node back in time saves the lock", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			lock := keptAlive(t, l, "k")
			nodes[0].Pause()
			nodes[1].Pause()
			time.Sleep(interval + 200*time.Millisecond) // extensions time out
			require.NoError(t, lock.Err(), "still valid")
			nodes[0].Resume()
			nodes[1].Resume()
			time.Sleep(3 * ttl)
			require.NoError(t, lock.Err(), "a retry reached the quorum again")
			require.NoError(t, lock.Release(t.Context()))
		})
	})
	t.Run("maximum hold time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3, core.WithTTL(ttl), core.WithMaxHold(5*ttl/2))
			start := time.Now()
			lock := keptAlive(t, l, "k")
			<-lock.Done()
			// Extensions at 1/3, 2/3, ..., 7/3 s; the one due at 8/3 s is past the
			// limit, so the lock ends at risk, TTL - drift - margin after the 7th.
			assert.Equal(t, 7*interval+ttl-drift(ttl)-ttl/core.DefaultAtRiskDivisor, time.Since(start))
			require.ErrorIs(t, lock.Err(), core.ErrMaxHold)
			require.ErrorIs(t, lock.Err(), core.ErrLockAtRisk)
			require.ErrorIs(t, lock.Err(), core.ErrLockLost)
			assert.Contains(t, lock.Err().Error(), `lock "k" at risk: the keep-alive stopped at the maximum hold time (2.5s), and 200ms of validity is left`)
		})
	})
	t.Run("Extend and keep-alive together", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3, core.WithTTL(ttl))
			lock := keptAlive(t, l, "k")
			for range 20 {
				require.NoError(t, lock.Extend(t.Context()))
				time.Sleep(ttl / 7)
			}
			require.NoError(t, lock.Err())
			require.NoError(t, lock.Release(t.Context()))
		})
	})
	t.Run("refused", func(t *testing.T) {
		l, _ := newLocker(t, 1, core.WithTTL(ttl))
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		require.NoError(t, lock.Release(t.Context()))
		require.ErrorIs(t, lock.KeepAlive(), core.ErrNotHeld)
		var nilLock *core.Lock
		require.ErrorIs(t, nilLock.KeepAlive(), core.ErrNotHeld)

		short, _ := newLocker(t, 1, core.WithTTL(60*time.Millisecond))
		lock, err = short.Acquire(t.Context(), "k")
		require.NoError(t, err)
		err = lock.KeepAlive()
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "no room to keep a lock alive")
		require.NoError(t, lock.Release(t.Context()))

		_, err = core.New(memory.AsNodes(memory.NewNodes(1)), core.WithTTL(ttl), core.WithKeepAlive(ttl))
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		_, err = core.New(memory.AsNodes(memory.NewNodes(1)), core.WithKeepAlive(-time.Second))
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		_, err = core.New(memory.AsNodes(memory.NewNodes(1)), core.WithMaxHold(-time.Second))
		require.ErrorIs(t, err, core.ErrInvalidArgument)
	})
	t.Run("after Close", func(t *testing.T) {
		nodes := memory.NewNodes(1)
		l, err := core.New(memory.AsNodes(nodes), core.WithTTL(ttl))
		require.NoError(t, err)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		require.NoError(t, lock.KeepAlive())
		require.NoError(t, l.Close())
		require.ErrorIs(t, lock.Err(), core.ErrReleased)
		require.ErrorIs(t, lock.KeepAlive(), core.ErrClosed)
		assert.Empty(t, nodes[0].Keys())
		require.NoError(t, goleak.Find(goleak.IgnoreCurrent()), "Close leaves no keep-alive goroutine")
	})
}

// keptAlive acquires key and keeps the lock alive.
func keptAlive(t *testing.T, l *core.Locker, key string) *core.Lock {
	t.Helper()
	lock, err := l.Acquire(t.Context(), key)
	require.NoError(t, err)
	require.NoError(t, lock.KeepAlive())
	return lock
}

func TestKeepAliveNoGoroutineAfterRelease(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	l, _ := newLocker(t, 3, core.WithTTL(300*time.Millisecond))
	var locks []*core.Lock
	for i := range 10 {
		lock, err := l.Acquire(t.Context(), "k"+strconv.Itoa(i))
		require.NoError(t, err)
		require.NoError(t, lock.KeepAlive())
		locks = append(locks, lock)
	}
	require.Eventually(t, func() bool { return l.Stats().RenewalTicks > 0 }, 5*time.Second, time.Millisecond)
	for _, lock := range locks {
		require.NoError(t, lock.Release(t.Context()))
	}
	require.NoError(t, goleak.Find(ignore), "Release of the last kept-alive lock ends the keep-alive goroutine")
}

func TestKeepAliveBatches(t *testing.T) {
	const ttl = time.Second
	t.Run("one round trip per node per tick", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			var locks []*core.Lock
			for i := range 200 {
				lock, err := l.Acquire(t.Context(), "k"+strconv.Itoa(i))
				require.NoError(t, err)
				require.NoError(t, lock.KeepAlive())
				locks = append(locks, lock)
				time.Sleep(5 * time.Millisecond) // spread over 1 s: due times differ
			}
			before := l.Stats()
			calls := make([]memory.Calls, len(nodes))
			for i, n := range nodes {
				calls[i] = n.Calls()
			}
			time.Sleep(10 * ttl)
			st := l.Stats()
			ticks := st.RenewalTicks - before.RenewalTicks
			for i, n := range nodes {
				c := n.Calls()
				assert.Equal(t, ticks, uint64(c.Batches-calls[i].Batches), "node %d: one batch per tick", i)
				assert.Equal(t, st.Renewals-before.Renewals, uint64(c.EvalSHA-calls[i].EvalSHA), "node %d: every renewal by SHA", i)
			}
			// Locks due within half an interval go together: at most two
			// ticks per interval, against 200 single extensions.
			assert.LessOrEqual(t, ticks, uint64(2*30+2))
			assert.GreaterOrEqual(t, st.Renewals-before.Renewals, uint64(200*29))
			for _, lock := range locks {
				require.NoError(t, lock.Err())
				require.NoError(t, lock.Release(t.Context()))
			}
		})
	})
	t.Run("nodes without the capability", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := memory.NewNodes(3)
			plain := make([]core.Node, len(nodes))
			for i, n := range nodes {
				plain[i] = plainNode{n}
			}
			l, err := core.New(plain, core.WithTTL(ttl))
			require.NoError(t, err)
			defer func() { require.NoError(t, l.Close()) }()
			var locks []*core.Lock
			for i := range 50 {
				lock, err := l.Acquire(t.Context(), "k"+strconv.Itoa(i))
				require.NoError(t, err)
				require.NoError(t, lock.KeepAlive())
				locks = append(locks, lock)
			}
			time.Sleep(5 * ttl)
			for _, lock := range locks {
				require.NoError(t, lock.Err())
			}
			for _, n := range nodes {
				assert.Zero(t, n.Calls().Batches)
				assert.Len(t, n.Keys(), 50)
			}
			nodes[0].FlushScripts()
			nodes[1].FlushScripts()
			time.Sleep(ttl)
			for _, lock := range locks {
				require.NoError(t, lock.Err(), "NOSCRIPT falls back to EVAL")
			}
		})
	})
	t.Run("script cache flushed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			lock := keptAlive(t, l, "k")
			time.Sleep(ttl)
			for _, n := range nodes {
				n.FlushScripts()
			}
			evals := nodes[0].Calls().Eval
			time.Sleep(ttl)
			require.NoError(t, lock.Err())
			assert.Equal(t, evals+1, nodes[0].Calls().Eval, "resent once by source, then by SHA")
		})
	})
}

// plainNode hides the optional capabilities of a memory node.
type plainNode struct{ n *memory.Node }

func (p plainNode) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return p.n.SetNX(ctx, key, value, ttl)
}
func (p plainNode) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	return p.n.EvalSHA(ctx, sha, keys, args)
}
func (p plainNode) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	return p.n.Eval(ctx, script, keys, args)
}
func (p plainNode) Classify(err error) driver.ErrorKind { return p.n.Classify(err) }
func (p plainNode) String() string                      { return p.n.String() }
func (p plainNode) Close() error                        { return p.n.Close() }

// noRaise is a node on which the fencing raise fails.
type noRaise struct{ plainNode }

var errNoRaise = errors.New("raise refused")

func (n noRaise) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	if sha == driver.ScriptRaiseFence.SHA() {
		return nil, errNoRaise
	}
	return n.plainNode.EvalSHA(ctx, sha, keys, args)
}

func (n noRaise) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	if script == driver.ScriptRaiseFence.Source() {
		return nil, errNoRaise
	}
	return n.plainNode.Eval(ctx, script, keys, args)
}

func TestLockEnd(t *testing.T) {
	t.Run("Done and Err after Release", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		done := lock.Done()
		select {
		case <-done:
			t.Fatal("Done closed while held")
		default:
		}
		require.NoError(t, lock.Err())
		ctx, cancel := lock.Context(t.Context())
		defer cancel()
		require.NoError(t, lock.Release(t.Context()))
		<-done
		require.ErrorIs(t, lock.Err(), core.ErrReleased)
		<-ctx.Done()
		require.ErrorIs(t, context.Cause(ctx), core.ErrReleased)
	})
	t.Run("validity runs out without keep-alive", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const ttl = time.Second
			l, _ := newLocker(t, 3, core.WithTTL(ttl))
			start := time.Now()
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			<-lock.Done()
			assert.Equal(t, ttl-drift(ttl), time.Since(start))
			require.ErrorIs(t, lock.Err(), core.ErrValidityExpired)
			require.ErrorIs(t, lock.Err(), core.ErrLockLost)
			assert.Zero(t, lock.Validity())
		})
	})
	t.Run("Err notices expiry without a timer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3, core.WithTTL(time.Second))
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			time.Sleep(time.Second)
			require.ErrorIs(t, lock.Err(), core.ErrValidityExpired)
			<-lock.Done()
		})
	})
	t.Run("Done after the end", func(t *testing.T) {
		l, _ := newLocker(t, 1)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		require.NoError(t, lock.Release(t.Context()))
		<-lock.Done()
		ctx, cancel := lock.Context(t.Context())
		defer cancel()
		<-ctx.Done()
		require.ErrorIs(t, context.Cause(ctx), core.ErrReleased)
	})
	t.Run("Context ends with its parent, and detaches", func(t *testing.T) {
		l, _ := newLocker(t, 1)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		parent, cancelParent := context.WithCancelCause(t.Context())
		ctx, cancel := lock.Context(parent)
		why := errors.New("shutting down")
		cancelParent(why)
		<-ctx.Done()
		require.ErrorIs(t, context.Cause(ctx), why)
		cancel()
		ctx2, cancel2 := lock.Context(t.Context())
		cancel2()
		require.ErrorIs(t, context.Cause(ctx2), context.Canceled)
		require.NoError(t, lock.Err(), "cancelling a derived context leaves the lock alone")
		require.NoError(t, lock.Release(t.Context()))
	})
	t.Run("nil lock", func(t *testing.T) {
		var lock *core.Lock
		<-lock.Done()
		require.ErrorIs(t, lock.Err(), core.ErrNotHeld)
		ctx, cancel := lock.Context(t.Context())
		defer cancel()
		<-ctx.Done()
		assert.Zero(t, lock.Token())
	})
}

func TestDo(t *testing.T) {
	const ttl = time.Second
	t.Run("holds while fn runs, then releases", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			err := l.Do(t.Context(), "k", func(ctx context.Context) error {
				time.Sleep(5 * ttl)
				require.NoError(t, ctx.Err())
				for _, n := range nodes {
					assert.Equal(t, []string{"k"}, n.Keys())
				}
				return nil
			})
			require.NoError(t, err)
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
			assert.Zero(t, l.Stats().Held)
		})
	})
	t.Run("fn's error", func(t *testing.T) {
		l, nodes := newLocker(t, 3, core.WithTTL(ttl))
		boom := errors.New("boom")
		err := l.Do(t.Context(), "k", func(context.Context) error { return boom })
		require.ErrorIs(t, err, boom)
		assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
	})
	t.Run("lost while fn runs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			var cause error
			err := l.Do(t.Context(), "k", func(ctx context.Context) error {
				nodes[0].Stop()
				nodes[1].Stop()
				<-ctx.Done()
				cause = context.Cause(ctx)
				return ctx.Err()
			})
			require.ErrorIs(t, cause, core.ErrLockLost)
			require.ErrorIs(t, cause, core.ErrUnavailable)
			require.ErrorIs(t, err, context.Canceled, "fn's error")
			require.ErrorIs(t, err, core.ErrLockLost, "joined with the lock's")
		})
	})
	t.Run("panic releases", func(t *testing.T) {
		l, nodes := newLocker(t, 3, core.WithTTL(ttl))
		assert.PanicsWithValue(t, "oops", func() {
			_ = l.Do(t.Context(), "k", func(context.Context) error { panic("oops") })
		})
		assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
	})
	t.Run("not acquired: fn does not run", func(t *testing.T) {
		l, nodes := newLocker(t, 1, core.WithTries(1))
		nodes[0].Set("k", "rival", time.Minute)
		err := l.Do(t.Context(), "k", func(context.Context) error {
			t.Error("fn ran without the lock")
			return nil
		})
		require.ErrorIs(t, err, core.ErrNotAcquired)
	})
	t.Run("bad input", func(t *testing.T) {
		l, _ := newLocker(t, 1)
		require.ErrorIs(t, l.Do(t.Context(), "k", nil), core.ErrInvalidArgument)
		require.ErrorIs(t, l.Do(t.Context(), "", func(context.Context) error { return nil }), core.ErrInvalidArgument)
		//lint:ignore SA1012 a nil context is the bad input under test
		require.ErrorIs(t, l.Do(nil, "k", func(context.Context) error { return nil }), core.ErrInvalidArgument)
	})
}

func TestFencing(t *testing.T) {
	t.Run("tokens grow", func(t *testing.T) {
		l, _ := newLocker(t, 3, core.WithFencing(true))
		var last int64
		for range 20 {
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			require.Greater(t, lock.Token(), last)
			last = lock.Token()
			require.NoError(t, lock.Release(t.Context()))
		}
		assert.Equal(t, int64(20), last, "no failed rounds here, so no gaps")
	})
	t.Run("off", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		assert.Zero(t, lock.Token())
		assert.Equal(t, 1, nodes[0].Calls().Acquires, "one acquisition, no fencing step")
	})
	t.Run("the second step raises the counters", func(t *testing.T) {
		l, nodes := newLocker(t, 3, core.WithFencing(true))
		fence, ok := driver.FenceKey("k")
		require.True(t, ok)
		nodes[0].Set(fence, "10", 0)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, int64(11), lock.Token())
		for i, n := range nodes {
			v, _, ok := n.Get(fence)
			require.True(t, ok)
			assert.Equal(t, "11", v, "node %d", i)
		}
		require.NoError(t, lock.Release(t.Context()))
		// Node 0, the only one that had seen 10, is gone: the others still
		// know the token was 11.
		nodes[0].Stop()
		lock, err = l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, int64(12), lock.Token())
		require.NoError(t, lock.Release(t.Context()))
	})
	t.Run("a node that lost its counter", func(t *testing.T) {
		// Without the restart guard, which would keep each restarted node
		// out for a TTL: the tokens must grow even when it counts at once.
		l, nodes := newLocker(t, 3, core.WithFencing(true), core.WithRestartGuard(0))
		var last int64
		for i := range 30 {
			n := nodes[i%3]
			n.Stop()
			n.Start() // empty: its counter is gone
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			require.Greater(t, lock.Token(), last)
			last = lock.Token()
			require.NoError(t, lock.Release(t.Context()))
		}
	})
	t.Run("nodes that refused are raised too", func(t *testing.T) {
		// Five nodes. D and E refuse (a stale key), so A, B and C grant
		// with token 1, a quorum that agrees. If only they knew it, A's
		// restart without data would leave A, D and E, a later quorum,
		// with no node that saw 1, and the next token would be 1 again.
		l, nodes := newLocker(t, 5, core.WithFencing(true), core.WithRestartGuard(0))
		nodes[3].Set("k", "stale", time.Hour)
		nodes[4].Set("k", "stale", time.Hour)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		first := lock.Token()
		require.NoError(t, lock.Release(t.Context()))
		fence, _ := driver.FenceKey("k")
		for i, n := range nodes {
			v, _, ok := n.Get(fence)
			require.True(t, ok, "node %d", i)
			assert.Equal(t, strconv.FormatInt(first, 10), v, "node %d knows the token", i)
		}
		nodes[3].Del("k")
		nodes[4].Del("k")
		nodes[0].Stop()
		nodes[0].Start() // empty: its counter is gone
		nodes[1].Stop()
		nodes[2].Stop()
		lock, err = l.Acquire(t.Context(), "k")
		require.NoError(t, err, "A, D and E are a quorum")
		assert.Greater(t, lock.Token(), first)
		require.NoError(t, lock.Release(t.Context()))
	})
	t.Run("a raise for the nodes behind does not wait for a node that is down", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 5, core.WithFencing(true), core.WithRestartGuard(0))
			nodes[3].Set("k", "stale", time.Hour) // D refuses: it is raised
			nodes[4].Pause()                      // E does not answer
			defer nodes[4].Resume()
			start := time.Now()
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			assert.LessOrEqual(t, time.Since(start), core.DefaultNodeTimeout, "at most the acquisition's own wait for E")
			fence, _ := driver.FenceKey("k")
			v, _, ok := nodes[3].Get(fence)
			require.True(t, ok)
			assert.Equal(t, strconv.FormatInt(lock.Token(), 10), v, "D knows the token")
			require.NoError(t, lock.Release(t.Context()))
		})
	})
	t.Run("raise fails", func(t *testing.T) {
		nodes := memory.NewNodes(3)
		wrapped := []core.Node{nodes[0], noRaise{plainNode{nodes[1]}}, noRaise{plainNode{nodes[2]}}}
		l, err := core.New(wrapped, core.WithFencing(true), core.WithTries(1))
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		fence, _ := driver.FenceKey("k")
		nodes[0].Set(fence, "10", 0) // the counters disagree: a raise is needed
		_, err = l.Acquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrUnavailable)
		require.ErrorIs(t, err, errNoRaise)
		for _, n := range nodes {
			_, _, ok := n.Get("k")
			assert.False(t, ok, "a failed round leaves no key")
		}
	})
	t.Run("a raise taken by refused nodes alone does not count", func(t *testing.T) {
		// Only granting nodes count toward the quorum at the token: a node
		// that refused may have given its counter to a round under way
		// before the raise (docs/design.md, fencing: the raise).
		nodes := memory.NewNodes(3)
		wrapped := []core.Node{nodes[0], noRaise{plainNode{nodes[1]}}, nodes[2]}
		l, err := core.New(wrapped, core.WithFencing(true), core.WithTries(1))
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		fence, _ := driver.FenceKey("k")
		nodes[0].Set(fence, "10", 0)          // the counters disagree: a raise is needed
		nodes[2].Set("k", "stale", time.Hour) // refuses, and takes the raise
		_, err = l.Acquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrUnavailable, "one granting node at the token, of a quorum of two")
		var qe *core.QuorumError
		require.ErrorAs(t, err, &qe)
		assert.Equal(t, core.OutcomeRefused, qe.Nodes[2].Outcome, "the refused node is shown as refused, not as raised")
	})
	t.Run("keys", func(t *testing.T) {
		for _, k := range []string{"orders:42", "{user:1}:lock", "a{b}c", "{", "é"} {
			fence, ok := driver.FenceKey(k)
			require.True(t, ok, k)
			assert.Equal(t, driver.HashSlot(k), driver.HashSlot(fence), k)
			assert.NotEqual(t, k, fence)
		}
		for _, k := range []string{"a}b", "{}x"} {
			_, ok := driver.FenceKey(k)
			assert.False(t, ok, k)
		}
		l, _ := newLocker(t, 1, core.WithFencing(true))
		_, err := l.Acquire(t.Context(), "a}b")
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "hash tag")
		lock, err := l.Acquire(t.Context(), "{a}b}")
		require.NoError(t, err, "a key with a hash tag can hold any }")
		require.NoError(t, lock.Release(t.Context()))
	})
}

func TestWakeOnRelease(t *testing.T) {
	const delay = time.Minute
	for _, wake := range []bool{true, false} {
		t.Run("wake="+strconv.FormatBool(wake), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				holder, nodes := newLocker(t, 3)
				waiter, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(delay, delay)), core.WithWakeOnRelease(wake))
				require.NoError(t, err)
				defer func() { require.NoError(t, waiter.Close()) }()
				held, err := holder.Acquire(t.Context(), "k")
				require.NoError(t, err)
				got := make(chan time.Time, 1)
				go func() {
					lock, err := waiter.Acquire(t.Context(), "k")
					assert.NoError(t, err)
					got <- time.Now()
					assert.NoError(t, lock.Release(t.Context()))
				}()
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if wake {
					assert.Equal(t, 1, waiter.Stats().Watching)
				} else {
					assert.Zero(t, waiter.Stats().Watching)
				}
				released := time.Now()
				require.NoError(t, held.Release(t.Context()))
				at := <-got
				if wake {
					// At once, or within the short pauses of a waiter whose
					// ticket's notice beat the release to the other nodes.
					assert.Less(t, at.Sub(released), 8*core.MinRetryDelay, "woken by the release notice")
				} else {
					assert.Equal(t, delay, at.Sub(released)+5*time.Second, "woken by the retry delay")
				}
				time.Sleep(2 * time.Second)
				assert.Zero(t, waiter.Stats().Watching, "the subscription ends after its linger")
			})
		})
	}
	t.Run("a confirmed subscription queues the waiter without a round", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := []*memory.Node{memory.New(memory.WithName("c")), memory.New(memory.WithName("a")), memory.New(memory.WithName("b"))}
			l, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
			require.NoError(t, err)
			nodes[0].Set("k", "rival", time.Hour)
			nodes[1].Set("k", "rival", time.Hour)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, err := l.Acquire(t.Context(), "k")
				assert.ErrorIs(t, err, core.ErrNotAcquired)
			}()
			synctest.Wait()
			// The first round asks every node; once the subscription is
			// confirmed, the waiter queues on the herald, "a" (the lock is
			// held there), and makes no round.
			acquires := func() []int {
				return []int{nodes[0].Calls().Acquires, nodes[1].Calls().Acquires, nodes[2].Calls().Acquires}
			}
			assert.Equal(t, []int{1, 1, 1}, acquires())
			q, _ := driver.QueueKey("k")
			assert.Contains(t, nodes[1].Keys(), q, "queued on the herald")
			time.Sleep(delay / 2)
			synctest.Wait()
			assert.Equal(t, []int{1, 1, 1}, acquires(), "no more rounds until the retry delay")
			require.NoError(t, l.Close())
			<-done
		})
	})
	t.Run("a woken round that wins the first node takes the others", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := []*memory.Node{memory.New(memory.WithName("c")), memory.New(memory.WithName("a")), memory.New(memory.WithName("b"))}
			// The holder's release reaches the herald ("a"), whose notice
			// wakes the waiter, only once it has landed on the other two:
			// otherwise the waiter's round can beat it there and win with
			// two nodes of three, which is right but not what this checks.
			open := make(chan struct{})
			views := memory.AsNodes(nodes)
			views[1] = &slowRelease{Node: nodes[1], open: open}
			holder, err := core.New(views)
			require.NoError(t, err)
			defer func() { require.NoError(t, holder.Close()) }()
			waiter, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
			require.NoError(t, err)
			defer func() { require.NoError(t, waiter.Close()) }()
			held, err := holder.Acquire(t.Context(), "k")
			require.NoError(t, err)
			got := make(chan *core.Lock, 1)
			go func() {
				lock, err := waiter.Acquire(t.Context(), "k")
				assert.NoError(t, err)
				got <- lock
			}()
			synctest.Wait()
			released := make(chan error, 1)
			go func() { released <- held.Release(t.Context()) }()
			synctest.Wait() // landed on "c" and "b"
			close(open)
			require.NoError(t, <-released)
			lock := <-got
			for _, n := range nodes {
				v, _, ok := n.Get("k")
				require.True(t, ok)
				assert.Equal(t, lock.Value(), v, "%s", n)
			}
			require.NoError(t, lock.Release(t.Context()))
		})
	})
}

func TestWaitQueue(t *testing.T) {
	const delay = time.Minute // retry delay: only notices wake waiters in time
	named := func() []*memory.Node {
		return []*memory.Node{memory.New(memory.WithName("c")), memory.New(memory.WithName("a")), memory.New(memory.WithName("b"))}
	}
	// handedOver checks that a waiter got the lock released at released
	// at once: within the short pauses (from core.MinRetryDelay, doubling)
	// of a waiter whose ticket's notice beat the release to the other
	// nodes, which the goroutines' order decides; nowhere near delay.
	handedOver := func(t *testing.T, released time.Time) {
		t.Helper()
		assert.Less(t, time.Since(released), 8*core.MinRetryDelay, "handed over at once, not after a retry delay")
	}
	newLockers := func(t *testing.T, nodes []*memory.Node, n int) []*core.Locker {
		ls := make([]*core.Locker, n)
		for i := range ls {
			l, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, l.Close()) })
			ls[i] = l
		}
		return ls
	}
	queueOnHerald := func(nodes []*memory.Node) bool {
		q, _ := driver.QueueKey("k")
		return slices.Contains(nodes[1].Keys(), q) // "a" is first by name
	}

	t.Run("first come, first served across Lockers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := named()
			ls := newLockers(t, nodes, 4)
			held, err := ls[0].Acquire(t.Context(), "k")
			require.NoError(t, err)
			type turn struct {
				who  int
				lock *core.Lock
			}
			turns := make(chan turn, 3)
			for who := 1; who <= 3; who++ {
				go func() {
					lock, err := ls[who].Acquire(t.Context(), "k")
					if assert.NoError(t, err) {
						turns <- turn{who, lock}
					}
				}()
				synctest.Wait() // queued before the next one starts
			}
			assert.True(t, queueOnHerald(nodes), "the waiters queue on the herald")
			for _, want := range []int{1, 2, 3} {
				released := time.Now()
				require.NoError(t, held.Release(t.Context()))
				got := <-turns
				assert.Equal(t, want, got.who, "served in the order they came")
				handedOver(t, released)
				held = got.lock
				synctest.Wait()
				assert.Empty(t, turns, "one release wakes one waiter")
			}
			require.NoError(t, held.Release(t.Context()))
			assert.False(t, queueOnHerald(nodes), "the queue is gone with its last waiter")
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
		})
	})

	t.Run("the releaser queues behind the waiter it handed over to", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := named()
			ls := newLockers(t, nodes, 2)
			held, err := ls[0].Acquire(t.Context(), "k")
			require.NoError(t, err)
			order := make(chan int, 2)
			waiterLock := make(chan *core.Lock, 1)
			go func() {
				lock, err := ls[1].Acquire(t.Context(), "k")
				if assert.NoError(t, err) {
					order <- 1
					waiterLock <- lock
				}
			}()
			synctest.Wait()
			require.NoError(t, held.Release(t.Context()))
			again := make(chan *core.Lock, 1)
			go func() {
				lock, err := ls[0].Acquire(t.Context(), "k")
				if assert.NoError(t, err) {
					order <- 0
					again <- lock
				}
			}()
			synctest.Wait()
			assert.Equal(t, 1, <-order, "the waiter takes the lock, not the releaser")
			assert.Empty(t, order)
			require.NoError(t, (<-waiterLock).Release(t.Context()))
			assert.Equal(t, 0, <-order, "then the releaser, woken by its own ticket")
			require.NoError(t, (<-again).Release(t.Context()))
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
		})
	})

	t.Run("a waiter that gives up leaves the queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := named()
			ls := newLockers(t, nodes, 3)
			held, err := ls[0].Acquire(t.Context(), "k")
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			_, err = ls[1].Acquire(ctx, "k")
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.False(t, queueOnHerald(nodes), "its ticket is taken out")
			// The next waiter is then the head of the queue.
			got := make(chan *core.Lock, 1)
			go func() {
				lock, err := ls[2].Acquire(t.Context(), "k")
				if assert.NoError(t, err) {
					got <- lock
				}
			}()
			synctest.Wait()
			released := time.Now()
			require.NoError(t, held.Release(t.Context()))
			lock := <-got
			handedOver(t, released)
			require.NoError(t, lock.Release(t.Context()))
		})
	})

	t.Run("a lock free on the herald but held elsewhere costs a few rounds, not a spin", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := named()
			ls := newLockers(t, nodes, 1)
			// Held on the other nodes but not the herald: the waiter
			// cannot queue (the lock looks free there), and tries again
			// at once, once, before it waits.
			nodes[0].Set("k", "rival", time.Hour)
			nodes[2].Set("k", "rival", time.Hour)
			ctx, cancel := context.WithTimeout(t.Context(), delay/2)
			defer cancel()
			_, err := ls[0].Acquire(ctx, "k")
			require.ErrorIs(t, err, core.ErrNotAcquired)
			// The first round, and the retry at once when the queue, once
			// the subscription was confirmed, found the lock free. Then
			// nothing until the retry delay: no notice came (the short
			// pauses after a notice are for a release on its way), and the
			// clean-ups find no ticket to hand the key to.
			assert.Equal(t, 2, quorumError(t, err).Tries)
			assert.False(t, queueOnHerald(nodes))
		})
	})

	t.Run("a waiter woken before the release reaches the other nodes takes the lock when it does", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := named()
			// Three tries: the first round, the round its ticket starts, and
			// one to spare. The follow-ups of the woken round (at once,
			// then after short pauses) must not use them up.
			waiter, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(delay, delay)), core.WithTries(3))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, waiter.Close()) })
			// The holder's releases on the nodes other than the herald
			// ("a") wait for open: the herald's notice wakes the waiter
			// while they are still held there, so its round loses.
			open := make(chan struct{})
			views := memory.AsNodes(nodes)
			for _, i := range []int{0, 2} {
				views[i] = &slowRelease{Node: nodes[i], open: open}
			}
			holder, err := core.New(views, core.WithRetryDelay(strategies.JitterDelay(delay, delay)), core.WithNodeTimeout(time.Second))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, holder.Close()) })
			held, err := holder.Acquire(t.Context(), "k")
			require.NoError(t, err)
			type result struct {
				lock *core.Lock
				err  error
			}
			got := make(chan result, 1)
			go func() {
				lock, err := waiter.Acquire(t.Context(), "k")
				got <- result{lock, err}
			}()
			synctest.Wait()
			require.True(t, queueOnHerald(nodes), "the waiter queued")
			released := make(chan error, 1)
			go func() { released <- held.Release(t.Context()) }()
			synctest.Wait()
			assert.Empty(t, got, "the waiter cannot win while the others are held")
			time.Sleep(10 * time.Millisecond)
			close(open)
			require.NoError(t, <-released)
			landed := time.Now()
			r := <-got
			require.NoError(t, r.err, "the follow-ups of the woken round use up no tries")
			lock := r.lock
			// Before, the waiter slept out its retry delay (a minute):
			// nobody tells it when the other nodes' releases land.
			assert.Less(t, time.Since(landed), core.DefaultNodeTimeout, "taken soon after the release landed")
			require.NoError(t, lock.Release(t.Context()))
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
		})
	})
}

// slowRelease is a node whose releases wait until open is closed; it is
// a plain core.Node (no batches), so every release comes through here.
type slowRelease struct {
	core.Node
	open chan struct{}
}

func (n *slowRelease) wait(ctx context.Context, release bool) error {
	if !release {
		return nil
	}
	select {
	case <-n.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *slowRelease) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	if err := n.wait(ctx, sha == driver.ScriptRelease.SHA()); err != nil {
		return nil, err
	}
	return n.Node.EvalSHA(ctx, sha, keys, args)
}

func (n *slowRelease) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	if err := n.wait(ctx, script == driver.ScriptRelease.Source()); err != nil {
		return nil, err
	}
	return n.Node.Eval(ctx, script, keys, args)
}
