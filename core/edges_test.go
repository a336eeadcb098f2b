package core_test

import (
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
