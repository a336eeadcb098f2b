package core_test

// One test per Redlock rule of DESIGN.md, each written so that breaking the
// rule in core makes it fail. Timing checks run in testing/synctest bubbles:
// memory nodes' latency and pauses then take fake time, and every duration
// below is exact.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// Rule 1: the value is 20 random bytes from crypto/rand, text-encoded, and
// unique per acquisition; it is what the nodes store.
func TestRule1Value(t *testing.T) {
	l, nodes := newLocker(t, 3)
	seen := make(map[string]bool)
	for i := 0; i < 200; i++ {
		lock, err := l.TryAcquire(t.Context(), "rule1")
		require.NoError(t, err)
		raw, err := base64.RawURLEncoding.DecodeString(lock.Value())
		require.NoError(t, err)
		assert.Len(t, raw, driver.ValueBytes)
		assert.False(t, seen[lock.Value()], "value repeated after %d acquisitions", i)
		seen[lock.Value()] = true
		for _, n := range nodes {
			v, _, ok := n.Get("rule1")
			require.True(t, ok)
			assert.Equal(t, lock.Value(), v)
		}
		require.NoError(t, lock.Release(t.Context()))
	}
}

// Rule 2: the quorum is N/2+1 by default; a quorum <= N/2 or > N is refused.
func TestRule2QuorumBounds(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for q := -1; q <= n+1; q++ {
			_, err := core.New(memory.AsNodes(memory.NewNodes(n)), core.WithQuorum(q))
			if q > n/2 && q <= n {
				assert.NoError(t, err, "N=%d quorum=%d", n, q)
			} else {
				assert.ErrorIs(t, err, core.ErrInvalidArgument, "N=%d quorum=%d", n, q)
			}
		}
		l, err := core.New(memory.AsNodes(memory.NewNodes(n)))
		require.NoError(t, err)
		assert.Equal(t, n/2+1, l.Quorum())
		require.NoError(t, l.Close())
	}
}

func TestRule2QuorumDecides(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5} {
		for rivals := 0; rivals <= n; rivals++ {
			t.Run(fmt.Sprintf("N=%d/rivals=%d", n, rivals), func(t *testing.T) {
				l, nodes := newLocker(t, n)
				for i := 0; i < rivals; i++ {
					nodes[i].Set("k", "rival", time.Minute)
				}
				lock, err := l.TryAcquire(t.Context(), "k")
				if n-rivals >= n/2+1 {
					require.NoError(t, err)
					require.NoError(t, lock.Release(t.Context()))
					return
				}
				require.ErrorIs(t, err, core.ErrNotAcquired)
				qe := quorumError(t, err)
				ok, refused, failed := qe.Counts()
				assert.Equal(t, []int{n - rivals, rivals, 0}, []int{ok, refused, failed})
				for i := 0; i < rivals; i++ {
					v, _, _ := nodes[i].Get("k")
					assert.Equal(t, "rival", v, "the rival's key was touched")
				}
			})
		}
	}
	t.Run("explicit quorum of all", func(t *testing.T) {
		l, nodes := newLocker(t, 5, core.WithQuorum(5))
		nodes[4].Set("k", "rival", time.Minute)
		_, err := l.TryAcquire(t.Context(), "k")
		assert.ErrorIs(t, err, core.ErrNotAcquired)
	})
}

// Rule 3: each node attempt has its own timeout; one dead node costs one
// node timeout, not a stall.
func TestRule3NodeTimeout(t *testing.T) {
	const timeout = 20 * time.Millisecond
	cases := []struct {
		strategy strategies.Strategy
		// round is how long a round with k paused nodes takes.
		round func(k int) time.Duration
	}{
		{strategies.Sequential(), func(k int) time.Duration { return time.Duration(k) * timeout }},
		{strategies.Parallel(), func(k int) time.Duration { return timeout }},
	}
	for _, c := range cases {
		t.Run(c.strategy.String()+"/one paused", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, nodes := newLocker(t, 5, core.WithStrategy(c.strategy), core.WithNodeTimeout(timeout))
				nodes[2].Pause()
				defer nodes[2].Resume()
				start := time.Now()
				lock, err := l.TryAcquire(t.Context(), "k")
				require.NoError(t, err)
				assert.Equal(t, c.round(1), time.Since(start))
				assert.Equal(t, l.TTL()-c.round(1)-l.Drift(), lock.Validity())
				require.NoError(t, lock.Release(t.Context()))
			})
		})
		t.Run(c.strategy.String()+"/three paused", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, nodes := newLocker(t, 5, core.WithStrategy(c.strategy), core.WithNodeTimeout(timeout))
				for _, n := range nodes[:3] {
					n.Pause()
					defer n.Resume()
				}
				start := time.Now()
				_, err := l.TryAcquire(t.Context(), "k")
				// The round, then the release of every node, itself bounded
				// by one node timeout because releases run in parallel; a
				// release to a node now suspect waits for a probe of it
				// still running, bounded by another.
				took := time.Since(start)
				assert.GreaterOrEqual(t, took, c.round(3)+timeout)
				assert.LessOrEqual(t, took, c.round(3)+2*timeout)
				require.ErrorIs(t, err, core.ErrUnavailable)
				assert.NotErrorIs(t, err, context.DeadlineExceeded, "a node timeout is not the caller's deadline")
				qe := quorumError(t, err)
				for _, n := range qe.Nodes[:3] {
					assert.Equal(t, core.OutcomeFailed, n.Outcome)
					assert.ErrorIs(t, n.Err, core.ErrNodeTimeout)
				}
				assert.Equal(t, []core.Outcome{core.OutcomeFailed, core.OutcomeFailed, core.OutcomeFailed, core.OutcomeOK, core.OutcomeOK}, outcomes(qe))
			})
		})
	}
}

// Rule 4: validity = TTL - elapsed - (TTL x drift factor + 2 ms); a quorum
// reached with no validity left is a failure.
func TestRule4Validity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const latency = 10 * time.Millisecond
		l, nodes := newLocker(t, 3, core.WithStrategy(strategies.Sequential()), core.WithTTL(2*time.Second))
		identified(t, l) // the first round's identity checks are not what this measures
		for _, n := range nodes {
			n.SetLatency(latency)
		}
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		want := 2*time.Second - 3*latency - (20*time.Millisecond + 2*time.Millisecond)
		assert.Equal(t, want, lock.Validity())
		time.Sleep(500 * time.Millisecond)
		assert.Equal(t, want-500*time.Millisecond, lock.Validity(), "validity counts down from the round's start")
		time.Sleep(want - 500*time.Millisecond)
		assert.Zero(t, lock.Validity())
	})
	synctest.Test(t, func(t *testing.T) {
		// TTL 100 ms, drift 3 ms: three sequential 40 ms answers use it up.
		l, nodes := newLocker(t, 3, core.WithStrategy(strategies.Sequential()), core.WithTTL(100*time.Millisecond))
		identified(t, l)
		for _, n := range nodes {
			n.SetLatency(40 * time.Millisecond)
		}
		_, err := l.TryAcquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrValidityExpired)
		qe := quorumError(t, err)
		assert.Equal(t, 100*time.Millisecond-120*time.Millisecond-3*time.Millisecond, qe.Validity)
		assert.Equal(t, emptyEverywhere(3), keysOn(nodes), "an expired acquisition must be released")
	})
}

// Rule 5: after a failed acquisition every node is released, including
// those whose reply was lost, and also when the caller's ctx was cancelled.
func TestRule5ReleaseAllAfterFailure(t *testing.T) {
	for _, s := range allStrategies() {
		t.Run(s.String()+"/contention", func(t *testing.T) {
			l, nodes := newLocker(t, 5, core.WithStrategy(s))
			for _, n := range nodes[2:] {
				n.Set("k", "rival", time.Minute)
			}
			_, err := l.TryAcquire(t.Context(), "k")
			require.ErrorIs(t, err, core.ErrNotAcquired)
			assert.Equal(t, [][]string{{}, {}, {"k"}, {"k"}, {"k"}}, keysOn(nodes))
		})
		t.Run(s.String()+"/lost replies", func(t *testing.T) {
			// Nodes 0 and 1 set the key but their replies are lost; node 2 is
			// held by a rival: no quorum, and the keys that did land must go.
			l, nodes := newLocker(t, 3, core.WithStrategy(s))
			nodes[0].DropReplies(true)
			nodes[1].DropReplies(true)
			nodes[2].Set("k", "rival", time.Minute)
			_, err := l.TryAcquire(t.Context(), "k")
			require.Error(t, err)
			assert.Equal(t, [][]string{{}, {}, {"k"}}, keysOn(nodes))
		})
	}
	t.Run("cancelled during the round", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Node 0 answers at once, nodes 1 and 2 hang; the caller gives up
			// after 5 ms. Node 0's key must not outlive the failed call.
			l, nodes := newLocker(t, 3, core.WithNodeTimeout(time.Second))
			nodes[1].Pause()
			nodes[2].Pause()
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(5*time.Millisecond, cancel)
			_, err := l.TryAcquire(ctx, "k")
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorIs(t, err, core.ErrNotAcquired)
			nodes[1].Resume()
			nodes[2].Resume()
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
		})
	})
}

// Rule 6: release goes to every node, whatever the strategy did.
func TestRule6ReleaseToAllNodes(t *testing.T) {
	for _, s := range allStrategies() {
		t.Run(s.String(), func(t *testing.T) {
			l, nodes := newLocker(t, 5, core.WithStrategy(s))
			lock, err := l.TryAcquire(t.Context(), "k")
			require.NoError(t, err)
			// Plant this lock's own value wherever the strategy did not set
			// it (as a lost reply may have): release must clear those too.
			for _, n := range nodes {
				if _, _, ok := n.Get("k"); !ok {
					n.Set("k", lock.Value(), time.Minute)
				}
			}
			before := make([]memory.Calls, 5)
			for i, n := range nodes {
				before[i] = n.Calls()
			}
			require.NoError(t, lock.Release(t.Context()))
			assert.Equal(t, emptyEverywhere(5), keysOn(nodes))
			for i, n := range nodes {
				c := n.Calls()
				// Besides the identity check of a node whose first yes this is.
				releases := c.EvalSHA + c.Eval - c.Identifies - (before[i].EvalSHA + before[i].Eval - before[i].Identifies)
				assert.Equal(t, 1, releases, "node %d: one release each", i)
			}
		})
	}
}

// Rule 7: extend on a quorum, within validity; the new validity is measured
// from the start of the extending round, not added to the old one.
func TestRule7Extend(t *testing.T) {
	t.Run("validity from the extending round", func(t *testing.T) {
		clock := memory.NewManualClock(time.Unix(1000, 0))
		nodes := memory.NewNodes(3, memory.WithClock(clock))
		l, err := core.New(memory.AsNodes(nodes), core.WithClock(clock), core.WithTTL(10*time.Second))
		require.NoError(t, err)
		defer l.Close()
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		clock.Advance(6 * time.Second)
		assert.Equal(t, 4*time.Second-drift(10*time.Second), lock.Validity())
		require.NoError(t, lock.Extend(t.Context()))
		assert.Equal(t, 10*time.Second-drift(10*time.Second), lock.Validity())
		for _, n := range nodes {
			_, ttl, ok := n.Get("k")
			require.True(t, ok)
			assert.Equal(t, 10*time.Second, ttl, "PEXPIRE resets the full TTL")
		}
		clock.Advance(9 * time.Second)
		assert.Equal(t, time.Second-drift(10*time.Second), lock.Validity(), "the keys would have expired without the extension")
	})
	t.Run("quorum lost", func(t *testing.T) {
		l, nodes := newLocker(t, 5)
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		for _, n := range nodes[:3] {
			n.Set("k", "rival", time.Minute) // expired and taken over
		}
		err = lock.Extend(t.Context())
		require.ErrorIs(t, err, core.ErrLockLost)
		assert.Zero(t, lock.Validity())
		require.ErrorIs(t, lock.Extend(t.Context()), core.ErrLockLost, "a lost lock stays lost")
		v, _, _ := nodes[0].Get("k")
		assert.Equal(t, "rival", v)
	})
	t.Run("minority lost", func(t *testing.T) {
		l, nodes := newLocker(t, 5)
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		for _, n := range nodes[:2] {
			n.Set("k", "rival", time.Minute)
		}
		require.NoError(t, lock.Extend(t.Context()))
	})
	t.Run("outage keeps the lock until its validity ends", func(t *testing.T) {
		l, nodes := newLocker(t, 5)
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		for _, n := range nodes[:3] {
			n.Stop()
		}
		err = lock.Extend(t.Context())
		require.ErrorIs(t, err, core.ErrUnavailable)
		assert.NotErrorIs(t, err, core.ErrLockLost)
		assert.Positive(t, lock.Validity())
		for _, n := range nodes[:3] {
			n.Start() // back, but empty: the lock is gone from them
		}
		require.ErrorIs(t, lock.Extend(t.Context()), core.ErrLockLost)
	})
	t.Run("after validity ran out", func(t *testing.T) {
		clock := memory.NewManualClock(time.Unix(1000, 0))
		nodes := memory.NewNodes(3, memory.WithClock(clock))
		l, err := core.New(memory.AsNodes(nodes), core.WithClock(clock), core.WithTTL(time.Second))
		require.NoError(t, err)
		defer l.Close()
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		clock.Advance(time.Second - drift(time.Second))
		calls := nodes[0].Calls()
		require.ErrorIs(t, lock.Extend(t.Context()), core.ErrValidityExpired)
		assert.Equal(t, calls, nodes[0].Calls(), "an extension that is already too late must not reach the nodes")
		assert.Zero(t, lock.Validity())
	})
	t.Run("round outlasts the validity", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithStrategy(strategies.Sequential()), core.WithTTL(time.Second))
			lock, err := l.TryAcquire(t.Context(), "k")
			require.NoError(t, err)
			// 25 ms of validity left, and a 30 ms round: every node still
			// holds the key and says yes, but too late to be trusted.
			time.Sleep(lock.Validity() - 25*time.Millisecond)
			for _, n := range nodes {
				n.SetLatency(10 * time.Millisecond)
			}
			err = lock.Extend(t.Context())
			require.ErrorIs(t, err, core.ErrValidityExpired)
			ok, _, _ := quorumError(t, err).Counts()
			assert.Equal(t, 3, ok)
			assert.Zero(t, lock.Validity())
		})
	})
}

// Rule 8: Acquire retries after a failed round with a jittered delay, at
// most WithTries rounds, within the context.
func TestRule8Retries(t *testing.T) {
	t.Run("jitter", func(t *testing.T) {
		p := strategies.JitterDelay(50*time.Millisecond, 250*time.Millisecond)
		distinct := make(map[time.Duration]bool)
		for i := 0; i < 1000; i++ {
			d := p(1)
			require.GreaterOrEqual(t, d, 50*time.Millisecond)
			require.LessOrEqual(t, d, 250*time.Millisecond)
			distinct[d] = true
		}
		assert.Greater(t, len(distinct), 900, "delays are not random")
		e := strategies.ExponentialJitter(10*time.Millisecond, time.Second)
		ceiling := 10 * time.Millisecond
		for n := 1; n < 100; n++ {
			d := e(n)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.LessOrEqual(t, d, ceiling, "after %d failures", n)
			ceiling = min(2*ceiling, time.Second)
		}
	})
	t.Run("tries and delays", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var (
				mu    sync.Mutex
				asked []int
			)
			policy := func(n int) time.Duration {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, n)
				return 7 * time.Millisecond
			}
			// Release notices would add a round right after subscribing.
			l, nodes := newLocker(t, 3, core.WithTries(4), core.WithRetryDelay(policy), core.WithWakeOnRelease(false))
			for _, n := range nodes {
				n.Set("k", "rival", time.Minute)
			}
			start := time.Now()
			_, err := l.Acquire(t.Context(), "k")
			require.ErrorIs(t, err, core.ErrNotAcquired)
			assert.Equal(t, 4, quorumError(t, err).Tries)
			assert.Equal(t, 21*time.Millisecond, time.Since(start))
			assert.Equal(t, []int{1, 2, 3}, asked)
			assert.Equal(t, 4, nodes[0].Calls().Acquires)
		})
	})
	t.Run("delay floor", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 1, core.WithTries(5), core.WithRetryDelay(func(int) time.Duration { return -time.Second }), core.WithWakeOnRelease(false))
			nodes[0].Set("k", "rival", time.Minute)
			start := time.Now()
			_, err := l.Acquire(t.Context(), "k")
			require.ErrorIs(t, err, core.ErrNotAcquired)
			assert.Equal(t, 4*core.MinRetryDelay, time.Since(start))
		})
	})
	t.Run("wins when the holder's lock expires", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithRetryDelay(strategies.JitterDelay(10*time.Millisecond, 20*time.Millisecond)))
			for _, n := range nodes {
				n.Set("k", "rival", 100*time.Millisecond)
			}
			start := time.Now()
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
			assert.Less(t, time.Since(start), 120*time.Millisecond)
			require.NoError(t, lock.Release(t.Context()))
		})
	})
	t.Run("deadline while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithRetryDelay(strategies.JitterDelay(time.Second, time.Second)), core.WithWakeOnRelease(false))
			for _, n := range nodes {
				n.Set("k", "rival", time.Minute)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := l.Acquire(ctx, "k")
			assert.Equal(t, 1500*time.Millisecond, time.Since(start), "Acquire must return when its context ends")
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorIs(t, err, core.ErrNotAcquired, "the lock error is kept alongside the context error")
			assert.Equal(t, 2, quorumError(t, err).Tries)
		})
	})
	t.Run("bad input is not retried", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		_, err := l.Acquire(t.Context(), "")
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		assert.Zero(t, nodes[0].Calls().Acquires)
	})
}

func TestErrNodeTimeoutIsNotContextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, nodes := newLocker(t, 1, core.WithNodeTimeout(10*time.Millisecond))
		nodes[0].Pause()
		defer nodes[0].Resume()
		_, err := l.TryAcquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrUnavailable)
		require.ErrorIs(t, err, core.ErrNodeTimeout)
		assert.False(t, errors.Is(err, context.DeadlineExceeded))
		assert.Contains(t, err.Error(), "no answer within the node timeout of 10ms")
	})
}

func TestReleaseOnSlowNodesIsAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, nodes := newLocker(t, 3, core.WithNodeTimeout(50*time.Millisecond))
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		for _, n := range nodes {
			n.SetLatency(200 * time.Millisecond)
		}
		err = lock.Release(t.Context())
		require.ErrorIs(t, err, core.ErrUnavailable, "timed-out nodes failed; they were not cut off by the caller")
		require.ErrorIs(t, err, core.ErrNodeTimeout)
		assert.Equal(t, []core.Outcome{core.OutcomeFailed, core.OutcomeFailed, core.OutcomeFailed}, outcomes(quorumError(t, err)))
		for _, n := range nodes {
			n.SetLatency(0)
		}
	})
}
