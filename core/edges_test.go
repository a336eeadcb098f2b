package core_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
)

// These tests drive the lifecycle's edges: the interleavings and inputs
// that the defects found from outside went through, each of which left a
// stray key, a spinning keeper, a lock released under a running Do, or a
// queue no release pops.

func TestKeyWithoutQueuePolls(t *testing.T) {
	const delay = time.Minute
	synctest.Test(t, func(t *testing.T) {
		nodes := memory.NewNodes(3)
		holder, err := core.New(memory.AsNodes(nodes))
		require.NoError(t, err)
		defer func() { require.NoError(t, holder.Close()) }()
		waiter, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
		require.NoError(t, err)
		defer func() { require.NoError(t, waiter.Close()) }()

		const key = "a}b" // no hash tag, and a "}": no queue shares its slot
		_, ok := driver.QueueKey(key)
		require.False(t, ok)
		held, err := holder.Acquire(t.Context(), key)
		require.NoError(t, err)
		got := make(chan time.Time, 1)
		start := time.Now()
		go func() {
			lock, err := waiter.Acquire(t.Context(), key)
			assert.NoError(t, err)
			got <- time.Now()
			assert.NoError(t, lock.Release(t.Context()))
		}()
		synctest.Wait()
		assert.Zero(t, waiter.Stats().Watching, "no subscription for a key no release announces")
		require.NoError(t, held.Release(t.Context()))
		assert.Equal(t, delay, (<-got).Sub(start), "taken at the retry delay: polling")
		synctest.Wait() // released
		for _, n := range nodes {
			assert.Empty(t, n.Keys(), "%s: no ticket queued anywhere", n)
			assert.Zero(t, n.Calls().Watches, "%s", n)
		}
	})
}

func TestKeepAliveRacingReleaseAndClose(t *testing.T) {
	t.Run("Release between KeepAlive's check and the keeper", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3)
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			defer core.SetKeeperAddHook(func() { assert.NoError(t, lock.Release(t.Context())) })()
			err = lock.KeepAlive()
			require.ErrorIs(t, err, core.ErrNotHeld)
			assert.Zero(t, l.Stats().KeptAlive, "the keeper holds a released lock")
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
			// A keeper left with a released lock would spin here and
			// never let the bubble settle, or outlive Close.
			synctest.Wait()
		})
	})
	// No synctest bubble: a spinning keeper would never let it settle.
	// Each iteration races KeepAlive against Release (or Close); the
	// keeper must end up holding nothing, and its goroutine must be gone.
	t.Run("Release", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		for i := range 2000 {
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			kept, released := make(chan error, 1), make(chan error, 1)
			start := make(chan struct{})
			go func() { <-start; kept <- lock.KeepAlive() }()
			go func() { <-start; released <- lock.Release(t.Context()) }()
			close(start)
			require.NoError(t, <-released)
			if err := <-kept; err != nil {
				require.ErrorIs(t, err, core.ErrNotHeld, "iteration %d", i)
			}
			require.Zero(t, l.Stats().KeptAlive, "iteration %d: the keeper holds a released lock", i)
		}
	})
	t.Run("Close", func(t *testing.T) {
		for i := range 500 {
			l, err := core.New(memory.AsNodes(memory.NewNodes(3)))
			require.NoError(t, err)
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			kept, closed := make(chan error, 1), make(chan error, 1)
			start := make(chan struct{})
			go func() { <-start; kept <- lock.KeepAlive() }()
			go func() { <-start; closed <- l.Close() }()
			close(start)
			require.NoError(t, <-closed)
			if err := <-kept; err != nil {
				require.ErrorIs(t, err, core.ErrClosed, "iteration %d", i)
			}
			require.Zero(t, l.Stats().KeptAlive, "iteration %d: the keeper holds a lock after Close", i)
		}
	})
}

func TestLostLeaderRoundCleansUp(t *testing.T) {
	const delay = time.Minute
	synctest.Test(t, func(t *testing.T) {
		l, herald, nodes := heldElsewhere(t, core.WithTries(2), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
		a := nodes[0]

		got := make(chan error, 1)
		go func() {
			_, err := l.Acquire(t.Context(), "k")
			got <- err
		}()
		synctest.Wait() // lost its first round, subscribed, waiting
		require.Equal(t, 1, l.Stats().Watching)
		a.DropReplies(true) // the woken round's SET lands on "a", its reply is lost
		herald.notify("")   // an empty notice: the subscription was made again
		err := <-got
		require.ErrorIs(t, err, core.ErrNotAcquired)
		a.DropReplies(false)
		assert.Empty(t, a.Keys(), "the lost woken round released the key its lost reply set")
		assert.Equal(t, []core.Outcome{core.OutcomeFailed, core.OutcomeRefused, core.OutcomeNotTried}, outcomes(quorumError(t, err)),
			"every node the round asked, as it answered")
		ok, refused, failed := quorumError(t, err).Counts()
		assert.Equal(t, [3]int{0, 1, 1}, [3]int{ok, refused, failed})
	})
}

// noticeNode is a node whose subscriptions the test can notify itself, as
// a backend does after making a dropped subscription again.
type noticeNode struct {
	*memory.Node
	mu       sync.Mutex
	notifies []func(string)
}

func (n *noticeNode) Watch(ctx context.Context, channel string, notify func(string)) (func(), error) {
	stop, err := n.Node.Watch(ctx, channel, notify)
	if err == nil {
		n.mu.Lock()
		n.notifies = append(n.notifies, notify)
		n.mu.Unlock()
	}
	return stop, err
}

func (n *noticeNode) notify(message string) {
	n.mu.Lock()
	fns := slices.Clone(n.notifies)
	n.mu.Unlock()
	for _, f := range fns {
		f(message)
	}
}

func TestFailedReleaseTriedAgain(t *testing.T) {
	calls := func(nodes []*memory.Node) []int {
		out := make([]int, len(nodes))
		for i, n := range nodes {
			c := n.Calls()
			out[i] = c.EvalSHA + c.Eval
		}
		return out
	}
	t.Run("by Release", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		nodes[0].Stop()
		nodes[1].Stop()
		require.ErrorIs(t, lock.Release(t.Context()), core.ErrUnavailable)
		assert.ErrorIs(t, lock.Err(), core.ErrReleased, "ended for its holder")
		assert.Equal(t, 1, l.Stats().Held, "still to be released")

		before := calls(nodes)
		require.ErrorIs(t, lock.Release(t.Context()), core.ErrUnavailable, "tried again, still down")
		assert.Equal(t, []bool{true, true, false}, asked(calls(nodes), before), "only the nodes that failed are asked again")

		nodes[0].StartKeepingData()
		nodes[1].StartKeepingData()
		require.NoError(t, lock.Release(t.Context()), "a quorum deleted it: 2 now and 1 before")
		core.Settle(l) // the other suspect node is released in the background
		assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
		assert.Zero(t, l.Stats().Held)
		before = calls(nodes)
		require.NoError(t, lock.Release(t.Context()))
		assert.Equal(t, []bool{false, false, false}, asked(calls(nodes), before), "released: nothing more to ask")
	})
	t.Run("after deletes whose replies were lost", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		nodes[0].DropReplies(true) // the delete lands, its reply does not
		nodes[1].DropReplies(true)
		require.ErrorIs(t, lock.Release(t.Context()), core.ErrUnavailable)
		nodes[0].DropReplies(false)
		nodes[1].DropReplies(false)
		assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
		require.NoError(t, lock.Release(t.Context()), "nothing of the lock is left: released, not \"not held\"")
		assert.Zero(t, l.Stats().Held)
	})
	t.Run("by Close", func(t *testing.T) {
		nodes := memory.NewNodes(3)
		l, err := core.New(memory.AsNodes(nodes))
		require.NoError(t, err)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		nodes[0].Stop()
		nodes[1].Stop()
		require.ErrorIs(t, lock.Release(t.Context()), core.ErrUnavailable)
		nodes[0].StartKeepingData()
		nodes[1].StartKeepingData()
		require.NoError(t, l.Close(), "Close releases what a failed Release left")
		assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
		require.NoError(t, lock.Release(t.Context()))
	})
	t.Run("after a Close that failed to", func(t *testing.T) {
		nodes := memory.NewNodes(3)
		l, err := core.New(memory.AsNodes(nodes))
		require.NoError(t, err)
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		nodes[0].Stop()
		nodes[1].Stop()
		require.ErrorIs(t, lock.Release(t.Context()), core.ErrUnavailable)
		require.NoError(t, l.Close(), "Close tried again, but the failure was reported already")
		require.ErrorIs(t, lock.Release(t.Context()), core.ErrClosed)
	})
}

// asked reports, per node, whether its count of calls grew from before.
func asked(now, before []int) []bool {
	out := make([]bool, len(now))
	for i := range now {
		out[i] = now[i] > before[i]
	}
	return out
}

func TestCloseDuringDo(t *testing.T) {
	const ttl = time.Second
	// held reports whether key holds one value on every node.
	held := func(nodes []*memory.Node, key string) bool {
		v0, _, ok := nodes[0].Get(key)
		for _, n := range nodes {
			if v, _, found := n.Get(key); !found || v != v0 {
				return false
			}
		}
		return ok
	}
	t.Run("Close waits for fn, which holds the lock until it returns", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := memory.NewNodes(3)
			l, err := core.New(memory.AsNodes(nodes), core.WithTTL(ttl))
			require.NoError(t, err)
			started := make(chan struct{})
			var fnEnd time.Time
			did := make(chan error, 1)
			go func() {
				did <- l.Do(t.Context(), "k", func(ctx context.Context) error {
					close(started)
					<-ctx.Done()
					assert.ErrorIs(t, context.Cause(ctx), core.ErrClosed, "cancelled by Close")
					// Winding down takes several TTLs: the lock must stay
					// held, and kept alive, until fn returns.
					for range 5 {
						time.Sleep(ttl)
						assert.True(t, held(nodes, "k"), "released while fn runs")
					}
					fnEnd = time.Now()
					return ctx.Err()
				})
			}()
			<-started
			require.NoError(t, l.Close())
			assert.False(t, time.Now().Before(fnEnd), "Close returned before fn")
			err = <-did
			require.ErrorIs(t, err, core.ErrClosed)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
		})
	})
	t.Run("Shutdown's bound", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := memory.NewNodes(3)
			l, err := core.New(memory.AsNodes(nodes), core.WithTTL(ttl))
			require.NoError(t, err)
			started, finish := make(chan struct{}), make(chan struct{})
			did := make(chan error, 1)
			go func() {
				did <- l.Do(t.Context(), "k", func(ctx context.Context) error {
					close(started)
					<-finish // ignores its context
					return nil
				})
			}()
			<-started
			ctx, cancel := context.WithTimeout(t.Context(), 3*ttl)
			defer cancel()
			err = l.Shutdown(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.True(t, held(nodes, "k"), "kept held and alive for the holder still at work")
			_, err = l.Acquire(t.Context(), "other")
			require.ErrorIs(t, err, core.ErrClosed, "closed to new calls")
			close(finish)
			require.ErrorIs(t, <-did, core.ErrClosed)
			require.NoError(t, l.Shutdown(t.Context()))
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
			require.NoError(t, l.Close(), "finished: later calls return nil")
		})
	})
	t.Run("Hold: Close waits for done", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := memory.NewNodes(3)
			l, err := core.New(memory.AsNodes(nodes), core.WithTTL(ttl))
			require.NoError(t, err)
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			ctx, done, err := lock.Hold(t.Context())
			require.NoError(t, err)
			closed := make(chan error, 1)
			go func() { closed <- l.Close() }()
			<-ctx.Done()
			require.ErrorIs(t, context.Cause(ctx), core.ErrClosed)
			time.Sleep(3 * ttl)
			synctest.Wait()
			assert.Empty(t, closed, "Close waits for done")
			assert.True(t, held(nodes, "k"))
			require.NoError(t, lock.Release(t.Context()))
			done()
			done()
			require.NoError(t, <-closed)
			_, _, err = lock.Hold(t.Context())
			require.ErrorIs(t, err, core.ErrClosed)
		})
	})
}

func TestNoSpinWhileNodesFail(t *testing.T) {
	const delay = time.Minute
	t.Run("a woken waiter in an outage waits its retry delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Free on the herald, so the waiter's rounds find it free
			// there and follow up briefly, then wait.
			l, herald, nodes := heldElsewhere(t, core.WithTries(100), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
			a, b, c := nodes[0], nodes[1], nodes[2]
			ctx, cancel := context.WithCancel(t.Context())
			got := make(chan error, 1)
			go func() {
				_, err := l.Acquire(ctx, "k")
				got <- err
			}()
			synctest.Wait()
			b.Stop()
			c.Stop()
			before := a.Calls().Acquires
			herald.notify("") // wakes it into rounds that fail: an outage
			time.Sleep(time.Second)
			assert.LessOrEqual(t, a.Calls().Acquires-before, 2, "rounds in the second after the notice: an outage is no reason to poll fast")
			cancel()
			require.ErrorIs(t, <-got, core.ErrUnavailable)
		})
	})
	t.Run("the keeper waits while a lock's Extend runs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock := &spinClock{Clock: driver.SystemClock()}
			nodes := memory.NewNodes(3)
			l, err := core.New(memory.AsNodes(nodes), core.WithClock(clock))
			require.NoError(t, err)
			defer func() { require.NoError(t, l.Close()) }()
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			require.NoError(t, lock.KeepAlive())
			// The renewal falls due while an Extend waits a node timeout
			// for a paused node.
			time.Sleep(core.DefaultTTL/core.DefaultKeepAliveDivisor - core.DefaultNodeTimeout/2)
			nodes[0].Pause()
			require.NoError(t, lock.Extend(t.Context()))
			nodes[0].Resume()
			assert.False(t, clock.spun.Load(), "the keeper spun while the Extend ran")
			require.NoError(t, lock.Release(t.Context()))
		})
	})
}

// spinClock is a clock that notices a spin: a goroutine reading it again
// and again while (fake) time stands still. It then lets time move, so
// that the spinning goroutine does not hang the bubble, and says so.
type spinClock struct {
	driver.Clock
	mu    sync.Mutex
	last  time.Time
	reads int
	spun  atomic.Bool
}

func (c *spinClock) Now() time.Time {
	now := c.Clock.Now()
	c.mu.Lock()
	if now.Equal(c.last) {
		c.reads++
	} else {
		c.last, c.reads = now, 0
	}
	spin := c.reads > 10_000
	c.mu.Unlock()
	if spin {
		c.spun.Store(true)
		time.Sleep(time.Millisecond)
	}
	return now
}

// heldElsewhere returns a Locker over the nodes "a" (the herald, first by
// name, behind a noticeNode), "b" and "c", closed when the test ends,
// with "k" held by a rival on "b" and "c": free on the herald.
func heldElsewhere(t *testing.T, opts ...core.Option) (*core.Locker, *noticeNode, []*memory.Node) {
	t.Helper()
	nodes := []*memory.Node{memory.New(memory.WithName("a")), memory.New(memory.WithName("b")), memory.New(memory.WithName("c"))}
	herald := &noticeNode{Node: nodes[0]}
	l, err := core.New([]core.Node{herald, nodes[1], nodes[2]}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	nodes[1].Set("k", "rival", time.Hour)
	nodes[2].Set("k", "rival", time.Hour)
	return l, herald, nodes
}
