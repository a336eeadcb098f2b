package core_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// rotatedLockers returns one Locker per node over the same memory nodes,
// each with the Sequential strategy and the node list rotated by its
// index: Locker i asks node i first. Every node answers after latency.
func rotatedLockers(t *testing.T, latency time.Duration, opts ...core.Option) ([]*core.Locker, []*memory.Node) {
	t.Helper()
	nodes := memory.NewNodes(3)
	for _, n := range nodes {
		n.SetLatency(latency)
	}
	lockers := make([]*core.Locker, len(nodes))
	for i := range lockers {
		rotated := append(append([]*memory.Node{}, nodes[i:]...), nodes[:i]...)
		l, err := core.New(memory.AsNodes(rotated), append([]core.Option{core.WithStrategy(strategies.Sequential())}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, l.Close()) })
		lockers[i] = l
	}
	return lockers, nodes
}

// TestTryAcquireSplitHasOneWinner: three TryAcquires at once on a free
// key, each asking a different node first, each win one node and are
// refused by the other two: a split, with no holder. The calls settle it:
// exactly one wins, and the others get ErrNotAcquired, refused by the
// winner's key on the first node of their leader round.
func TestTryAcquireSplitHasOneWinner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lockers, nodes := rotatedLockers(t, time.Millisecond)
		locks := make([]*core.Lock, len(lockers))
		errs := make([]error, len(lockers))
		done := make(chan struct{}, len(lockers))
		for i, l := range lockers {
			go func() {
				locks[i], errs[i] = l.TryAcquire(t.Context(), "k")
				done <- struct{}{}
			}()
		}
		for range lockers {
			<-done
		}

		var winner *core.Lock
		for i, lock := range locks {
			if errs[i] != nil {
				require.ErrorIs(t, errs[i], core.ErrNotAcquired)
				assert.Contains(t, errs[i].Error(), "lock held by another owner")
				qe := quorumError(t, errs[i])
				assert.Equal(t, 2, qe.Tries, "the split round, then a leader round refused at its first node")
				ok, refused, _ := qe.Counts()
				assert.Equal(t, [2]int{1, 2}, [2]int{ok, refused}, "the nodes are those of the round that split")
				continue
			}
			require.Nil(t, winner, "two holders")
			winner = lock
		}
		require.NotNil(t, winner, "nobody won a free key: %v", errs)
		state, err := lockers[0].Inspect(t.Context(), "k")
		require.NoError(t, err)
		value, on, _ := state.Holder()
		assert.Equal(t, winner.Value(), value, "the losers were refused by the winner")
		assert.Equal(t, len(nodes), on, "the winner holds every node; the losers' keys are gone")
		require.NoError(t, winner.Release(t.Context()))
		assert.Equal(t, emptyEverywhere(len(nodes)), keysOn(nodes))
	})
}

// TestTryAcquireHeldCost: a TryAcquire of a lock held on
// every node makes one round; of a lock held on a quorum, whose other node
// it wins, one leader round more, refused at once by the holder's first
// node; of a lock held on a quorum without that node, every leader round.
// All say the lock is held and leave no key of theirs behind.
func TestTryAcquireHeldCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lockers, nodes := rotatedLockers(t, time.Millisecond)
		l := lockers[0]
		holder, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		_, err = l.TryAcquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrNotAcquired)
		assert.Equal(t, 1, quorumError(t, err).Tries, "held everywhere: one round, no leader round")

		// The holder keeps a quorum, on the nodes first by name, where
		// leader rounds begin.
		last := 0
		for i, n := range nodes {
			if n.String() > nodes[last].String() {
				last = i
			}
		}
		nodes[last].Del("k")
		_, err = l.TryAcquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrNotAcquired)
		assert.Contains(t, err.Error(), "lock held by another owner: 1 of 3 nodes ok, 2 refused, 0 failed, quorum 2, after 2 tries")
		assert.Equal(t, 2, quorumError(t, err).Tries, "the round, then a leader round refused at its first node")
		_, on, _ := mustInspect(t, l).Holder()
		assert.Equal(t, 2, on)
		assert.Empty(t, nodes[last].Keys(), "the key the round set on the free node was released")

		// Now the holder lacks the node leader rounds begin with.
		first := 0
		for i, n := range nodes {
			if n.String() < nodes[first].String() {
				first = i
			}
		}
		nodes[last].Set("k", holder.Value(), time.Minute)
		nodes[first].Del("k")
		_, err = l.TryAcquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrNotAcquired)
		assert.Equal(t, 4, quorumError(t, err).Tries, "the round, then three leader rounds past the first node")
		assert.Empty(t, nodes[first].Keys(), "the key the rounds set on the free node was released")
		require.NoError(t, holder.Release(t.Context()))
	})
}

func mustInspect(t *testing.T, l *core.Locker) *core.KeyState {
	t.Helper()
	state, err := l.Inspect(t.Context(), "k")
	require.NoError(t, err)
	return state
}
