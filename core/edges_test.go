package core_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
		waiter, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(core.JitterDelay(delay, delay)))
		require.NoError(t, err)
		defer func() { require.NoError(t, waiter.Close()) }()

		const key = "a}b" // no hash tag, and a "}": no queue shares its slot
		_, ok := core.QueueKey(key)
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
		// "a" is the herald, first by name: a woken round asks it first.
		a, b, c := memory.New(memory.WithName("a")), memory.New(memory.WithName("b")), memory.New(memory.WithName("c"))
		herald := &noticeNode{Node: a}
		l, err := core.New([]core.Node{herald, b, c}, core.WithTries(2), core.WithRetryDelay(core.JitterDelay(delay, delay)))
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		b.Set("k", "rival", time.Hour)
		c.Set("k", "rival", time.Hour)

		got := make(chan error, 1)
		go func() {
			_, err := l.Acquire(t.Context(), "k")
			got <- err
		}()
		synctest.Wait() // lost its first round, subscribed, waiting
		require.Equal(t, 1, l.Stats().Watching)
		a.DropReplies(true) // the woken round's SET lands on "a", its reply is lost
		herald.notify("") // an empty notice: the subscription was made again
		err = <-got
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
