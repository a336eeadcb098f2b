package core_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
)

// sharded is a node that says it spreads its keys over several servers.
type sharded struct{ plainNode }

func (sharded) Sharded() bool { return true }

func TestRestartGuardDefaults(t *testing.T) {
	for n, want := range map[int]bool{1: false, 2: false, 3: true, 5: true} {
		l, _ := newLocker(t, n)
		if want {
			assert.Equal(t, core.DefaultTTL+drift(core.DefaultTTL), l.RestartGuard(), "N=%d: on, for the Locker's TTL", n)
		} else {
			assert.Zero(t, l.RestartGuard(), "N=%d: off", n)
		}
	}
	l, _ := newLocker(t, 1, core.WithRestartGuard(time.Minute))
	assert.Equal(t, time.Minute+drift(time.Minute), l.RestartGuard(), "on for one node when asked")
	l, _ = newLocker(t, 5, core.WithRestartGuard(0))
	assert.Zero(t, l.RestartGuard())

	for name, opts := range map[string][]core.Option{
		"shorter than the TTL": {core.WithTTL(time.Minute), core.WithRestartGuard(time.Second)},
		"negative":             {core.WithRestartGuard(-time.Second)},
		"absurd":               {core.WithRestartGuard(200 * 365 * 24 * time.Hour)},
	} {
		_, err := core.New(memory.AsNodes(memory.NewNodes(3)), opts...)
		require.ErrorIs(t, err, core.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "restart guard", name)
	}
	nodes := memory.NewNodes(3)
	all := []core.Node{sharded{plainNode{nodes[0]}}, sharded{plainNode{nodes[1]}}, sharded{plainNode{nodes[2]}}}
	_, err := core.New(all, core.WithRestartGuard(core.DefaultTTL))
	require.ErrorIs(t, err, core.ErrInvalidArgument, "asked for, but it can watch none of the nodes")
	assert.Contains(t, err.Error(), "sharded")
	l, err = core.New(all)
	require.NoError(t, err, "the default simply does not apply to sharded nodes")
	defer l.Close()
	assert.Zero(t, l.RestartGuard())
}

// restartEmpty restarts a memory node the way a Redis server without
// persistence restarts: empty, its birth key gone.
func restartEmpty(n *memory.Node) {
	n.Stop()
	n.Start()
}

func TestRestartGuard(t *testing.T) {
	// The scenario the Redlock specification says breaks safety: A holds
	// the lock on nodes 0 and 1 (node 2 was cut off), node 1 restarts at once
	// without persistence, node 2 comes back, and B asks.
	scenario := func(t *testing.T, opts ...core.Option) (a, b *core.Locker, nodes []*memory.Node, held *core.Lock) {
		nodes = memory.NewNodes(3)
		opts = append([]core.Option{core.WithTries(1)}, opts...)
		var err error
		a, err = core.New(memory.AsNodes(nodes), opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = a.Close() })
		b, err = core.New(memory.AsNodes(nodes), opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		nodes[2].Pause()
		held, err = a.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		restartEmpty(nodes[1])
		nodes[2].Resume()
		return a, b, nodes, held
	}

	t.Run("off: the restarted node lets a second holder in", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, b, _, held := scenario(t, core.WithRestartGuard(0))
			second, err := b.TryAcquire(t.Context(), "k")
			require.NoError(t, err, "the hole the guard closes")
			assert.NoError(t, held.Err(), "and the first holder does not know")
			require.NoError(t, second.Release(t.Context()))
		})
	})

	t.Run("on: the restarted node does not vote for a TTL", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, b, nodes, held := scenario(t)
			_, err := b.TryAcquire(t.Context(), "k")
			require.ErrorIs(t, err, core.ErrNotAcquired)
			require.ErrorIs(t, err, core.ErrNodeRestarted)
			qe := quorumError(t, err)
			assert.Equal(t, []core.Outcome{core.OutcomeRefused, core.OutcomeFailed, core.OutcomeOK}, outcomes(qe))
			var young *core.RestartGuardError
			require.ErrorAs(t, qe.Nodes[1].Err, &young)
			assert.Zero(t, young.Age, "born at its first guarded call, just now")
			assert.Equal(t, core.DefaultTTL+drift(core.DefaultTTL), young.MinAge)
			assert.Contains(t, young.Error(), "restart guard")
			_, _, ok := nodes[1].Get("k")
			assert.False(t, ok, "a young node sets nothing")
			born, _, ok := nodes[1].Get(driver.BirthKey)
			require.True(t, ok)
			assert.Equal(t, strconv.FormatInt(time.Now().UnixMilli(), 10), born, "its birth is the node's time")

			// The holder's next extension finds out: one node remembers it.
			require.ErrorIs(t, held.Extend(t.Context()), core.ErrLockLost)

			// Still young: a free lock still needs two old nodes.
			time.Sleep(time.Second)
			_, err = b.TryAcquire(t.Context(), "k")
			require.ErrorAs(t, err, &young)
			assert.Equal(t, time.Second, young.Age)

			// Once older than the max TTL, it votes again.
			time.Sleep(young.MinAge - young.Age)
			lock, err := b.TryAcquire(t.Context(), "k")
			require.NoError(t, err)
			require.NoError(t, lock.Release(t.Context()))
		})
	})

	t.Run("on: a majority of young nodes is no outage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTries(1))
			restartEmpty(nodes[0])
			restartEmpty(nodes[2])
			_, err := l.TryAcquire(t.Context(), "k")
			require.ErrorIs(t, err, core.ErrNodeRestarted)
			assert.NotErrorIs(t, err, core.ErrUnavailable, "young servers are no outage to alert on")
			assert.Equal(t, core.ErrNodeRestarted, quorumError(t, err).Reason)
			assert.Equal(t, core.ReasonRestarted, core.Reason(err))
			assert.Contains(t, err.Error(), "enough nodes vote 10.102s after the last try")
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes), "the old node's key was cleaned up")
		})
	})

	t.Run("persistence keeps the birth key: no wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTries(1), core.WithQuorum(3))
			lock, err := l.TryAcquire(t.Context(), "k")
			require.NoError(t, err)
			require.NoError(t, lock.Release(t.Context()))
			nodes[1].Stop()
			nodes[1].StartKeepingData()
			lock, err = l.TryAcquire(t.Context(), "k")
			require.NoError(t, err, "a node that kept its data forgot no lock")
			require.NoError(t, lock.Release(t.Context()))
		})
	})

	t.Run("a clock that went back makes the node young", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTries(1), core.WithQuorum(3))
			nodes[0].Set(driver.BirthKey, strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10), 0)
			_, err := l.TryAcquire(t.Context(), "k")
			var young *core.RestartGuardError
			require.ErrorAs(t, err, &young)
			assert.Zero(t, young.Age)
		})
	})

	t.Run("fencing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTries(1), core.WithFencing(true))
			var last int64
			for i := range 6 {
				restartEmpty(nodes[i%3]) // counter and birth gone
				lock, err := l.TryAcquire(t.Context(), "k")
				require.NoError(t, err, "round %d", i)
				require.Greater(t, lock.Token(), last)
				last = lock.Token()
				require.NoError(t, lock.Release(t.Context()))
				time.Sleep(l.RestartGuard()) // the restarted node is old again
			}
		})
	})

	t.Run("fencing: a young node catches up on the counter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTries(1), core.WithFencing(true))
			lock, err := l.TryAcquire(t.Context(), "k")
			require.NoError(t, err)
			require.NoError(t, lock.Release(t.Context()))
			restartEmpty(nodes[0]) // counter and birth gone
			lock, err = l.TryAcquire(t.Context(), "k")
			require.NoError(t, err, "the two old nodes are a quorum")
			require.NoError(t, lock.Release(t.Context()))
			fence, _ := driver.FenceKey("k")
			v, _, ok := nodes[0].Get(fence)
			require.True(t, ok, "the young node's counter was raised")
			assert.Equal(t, strconv.FormatInt(lock.Token(), 10), v)
		})
	})

	t.Run("sharded nodes are left out", func(t *testing.T) {
		nodes := memory.NewNodes(3)
		list := []core.Node{nodes[0], nodes[1], sharded{plainNode{nodes[2]}}}
		l, err := core.New(list, core.WithQuorum(3), core.WithTries(1))
		require.NoError(t, err)
		defer l.Close()
		restartEmpty(nodes[2])
		calls := nodes[2].Calls()
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err, "a sharded node votes at once")
		assert.Equal(t, calls.SetNX+1, nodes[2].Calls().SetNX, "with a plain SET NX")
		_, _, ok := nodes[2].Get(driver.BirthKey)
		assert.False(t, ok, "and gets no birth key")
		require.NoError(t, lock.Release(t.Context()))
	})

	t.Run("the birth key is no lock key", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		_, err := l.TryAcquire(t.Context(), driver.BirthKey)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "reserved")
	})
}

func TestAdopt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, nodes := newLocker(t, 3, core.WithTries(1), core.WithQuorum(3))
		restartEmpty(nodes[1])
		restartEmpty(nodes[2])
		_, err := l.TryAcquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrNodeRestarted)

		require.NoError(t, l.Adopt(t.Context(), nodes[1].String()))
		born, _, _ := nodes[1].Get(driver.BirthKey)
		assert.Equal(t, "0", born, "adopted")
		_, err = l.TryAcquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrNodeRestarted, "node 2 is still young")

		require.NoError(t, l.Adopt(t.Context()), "every node")
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		require.NoError(t, lock.Release(t.Context()))
	})

	l, nodes := newLocker(t, 3)
	err := l.Adopt(t.Context(), "nowhere")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `"nowhere"`)
	//lint:ignore SA1012 a nil context is the misuse under test
	require.ErrorIs(t, l.Adopt(nil), core.ErrInvalidArgument) //nolint:staticcheck

	nodes[0].Stop()
	err = l.Adopt(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), nodes[0].String(), "the error names the node that failed")
	assert.ErrorIs(t, err, memory.ErrDown)
	born, _, _ := nodes[1].Get(driver.BirthKey)
	assert.Equal(t, "0", born, "the others are adopted")

	off, offNodes := newLocker(t, 3, core.WithRestartGuard(0))
	offNodes[0].Del(driver.BirthKey)
	require.NoError(t, off.Adopt(t.Context()), "nothing to do with the guard off")
	_, _, ok := offNodes[0].Get(driver.BirthKey)
	assert.False(t, ok)

	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Adopt(context.Background()), core.ErrClosed)
	assert.False(t, errors.Is(l.Adopt(context.Background()), core.ErrInvalidArgument))
}

// TestRestartGuardBirth: a node's birth is when its data began (the
// server's start), not when a Locker first used it.
func TestRestartGuardBirth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := memory.NewNodes(3)
		for _, n := range nodes {
			n.Del(driver.BirthKey) // not adopted: as a server this library never used
		}
		time.Sleep(4 * time.Second) // up 4 s
		l, err := core.New(memory.AsNodes(nodes), core.WithTries(1))
		require.NoError(t, err)
		defer l.Close()
		_, err = l.TryAcquire(t.Context(), "k")
		var young *core.RestartGuardError
		require.ErrorAs(t, err, &young)
		assert.Equal(t, 4*time.Second, young.Age, "its data is as old as the server, not as its first use")
		born, _, _ := nodes[0].Get(driver.BirthKey)
		assert.Equal(t, strconv.FormatInt(time.Now().Add(-4*time.Second).UnixMilli(), 10), born)

		for _, n := range nodes {
			n.Del(driver.BirthKey)
		}
		time.Sleep(l.RestartGuard() - 4*time.Second) // up a max TTL
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err, "a server up longer than the max TTL votes on its first use")
		require.NoError(t, lock.Release(t.Context()))
	})
}

// TestRestartGuardWait: Acquire waits for young nodes within its context
// rather than spending its tries, and says so to its Observer.
func TestRestartGuardWait(t *testing.T) {
	// Two of three nodes restarted empty: no quorum until one votes.
	setup := func(t *testing.T, opts ...core.Option) (*core.Locker, *[]core.Event) {
		var events []core.Event
		opts = append(opts, core.WithObserver(observerFunc(func(_ context.Context, e core.Event) {
			events = append(events, e)
		})))
		l, nodes := newLocker(t, 3, opts...)
		restartEmpty(nodes[0])
		restartEmpty(nodes[1])
		time.Sleep(time.Second)
		return l, &events
	}

	t.Run("waits, within its context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, events := setup(t)
			start := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			lock, err := l.Acquire(ctx, "k")
			require.NoError(t, err, "the default tries alone last less than the guard")
			assert.Equal(t, l.RestartGuard()-time.Second+core.MinRetryDelay, time.Since(start), "no longer than the guard needs")
			require.Len(t, *events, 2)
			wait := (*events)[0]
			assert.Equal(t, core.OpWait, wait.Kind)
			assert.Equal(t, "wait", wait.Kind.String())
			assert.Equal(t, l.RestartGuard()-time.Second+core.MinRetryDelay, wait.Duration)
			assert.ErrorIs(t, wait.Err, core.ErrNodeRestarted)
			assert.Equal(t, core.OpAcquire, (*events)[1].Kind)
			assert.Equal(t, 2, (*events)[1].Tries, "the round that found them young, then the one after the wait")
			require.NoError(t, lock.Release(t.Context()))
		})
	})

	t.Run("the context ends first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := setup(t)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			_, err := l.Acquire(ctx, "k")
			require.ErrorIs(t, err, core.ErrNodeRestarted)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, core.ErrNodeRestarted, quorumError(t, err).Reason, "the reason, at the top")
			assert.Contains(t, err.Error(), `acquire "k": node restarted recently (context deadline exceeded)`)
			assert.Contains(t, err.Error(), "enough nodes vote 9.102s after the last try")
		})
	})

	t.Run("Close ends the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, events := setup(t)
			done := make(chan error, 1)
			go func() {
				_, err := l.Acquire(t.Context(), "k")
				done <- err
			}()
			synctest.Wait() // waiting for the young nodes
			require.Len(t, *events, 1)
			start := time.Now()
			require.NoError(t, l.Close())
			err := <-done
			require.ErrorIs(t, err, core.ErrClosed)
			assert.ErrorIs(t, err, core.ErrNodeRestarted, "with the round that found them young")
			assert.Zero(t, time.Since(start), "at once, not after the wait")
		})
	})

	t.Run("TryAcquire does not wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, events := setup(t)
			start := time.Now()
			_, err := l.TryAcquire(t.Context(), "k")
			require.ErrorIs(t, err, core.ErrNodeRestarted)
			assert.Zero(t, time.Since(start))
			require.Len(t, *events, 1)
			assert.Equal(t, core.OpAcquire, (*events)[0].Kind)
		})
	})

	t.Run("a node that stays young costs one guard's wait, then tries", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTries(3))
			future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10) // the clock went back
			nodes[0].Set(driver.BirthKey, future, 0)
			nodes[1].Set(driver.BirthKey, future, 0)
			start := time.Now()
			_, err := l.Acquire(context.Background(), "k")
			require.ErrorIs(t, err, core.ErrNodeRestarted)
			assert.Less(t, time.Since(start), 2*l.RestartGuard(), "no endless wait without a deadline")
			assert.GreaterOrEqual(t, time.Since(start), l.RestartGuard())
		})
	})
}
