package core_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

func TestCampaign(t *testing.T) {
	t.Run("one leads; the other leads after it resigns, with a greater term", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3, core.WithTTL(time.Second))
			a, err := l.Campaign(t.Context(), "elect", "host-a")
			require.NoError(t, err)
			assert.Positive(t, a.Token(), "a term without WithFencing")
			got, err := l.Leader(t.Context(), "elect")
			require.NoError(t, err)
			assert.Equal(t, core.Leader{Value: "host-a", Term: a.Token()}, got)

			won := make(chan *core.Lock)
			go func() {
				b, err := l.Campaign(t.Context(), "elect", "host-b")
				assert.NoError(t, err)
				won <- b
			}()
			time.Sleep(3 * time.Second) // fake time: a is kept alive past its TTL
			synctest.Wait()
			select {
			case <-won:
				t.Fatal("two leaders")
			default:
			}
			require.NoError(t, a.Err(), "kept alive")
			require.NoError(t, a.Release(t.Context()))
			b := <-won
			assert.Greater(t, b.Token(), a.Token(), "terms increase")
			got, err = l.Leader(t.Context(), "elect")
			require.NoError(t, err)
			assert.Equal(t, core.Leader{Value: "host-b", Term: b.Token()}, got)
			require.NoError(t, b.Release(t.Context()))
			got, err = l.Leader(t.Context(), "elect")
			require.NoError(t, err)
			assert.Zero(t, got, "nobody leads")
		})
	})
	t.Run("a leader whose key is deleted loses its context with lead time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(time.Second))
			a, err := l.Campaign(t.Context(), "elect", "host-a")
			require.NoError(t, err)
			ctx, cancel := a.Context(t.Context())
			defer cancel()
			for _, n := range nodes {
				n.Del("elect")
			}
			<-ctx.Done()
			require.ErrorIs(t, context.Cause(ctx), core.ErrLockLost)
			got, err := l.Leader(t.Context(), "elect")
			require.NoError(t, err)
			assert.Zero(t, got)
		})
	})
	t.Run("bad_values_and_keys_are_refused", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		for _, v := range []string{"", strings.Repeat("x", 257), "a\nb", "\xff"} {
			_, err := l.Campaign(t.Context(), "elect", v)
			require.ErrorIs(t, err, core.ErrInvalidArgument, "%q", v)
		}
		_, err := l.Campaign(t.Context(), "", "v")
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		_, err = l.Leader(t.Context(), "")
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		_, err = l.Observe(t.Context(), "")
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		_, err = l.Campaign(t.Context(), "a}b", "v")
		require.ErrorIs(t, err, core.ErrInvalidArgument, "no term counter can share the slot")
	})
	t.Run("leader_of_a_key_a_plain_lock_holds", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		m, err := l.Acquire(t.Context(), "elect")
		require.NoError(t, err)
		_, err = l.Leader(t.Context(), "elect")
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		require.NoError(t, m.Release(t.Context()))
	})
}

func TestObserve(t *testing.T) {
	t.Run("sees the first leader, a resignation and the next, at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3, core.WithTTL(time.Minute))
			ctx, cancel := context.WithCancel(t.Context())
			ch, err := l.Observe(ctx, "elect")
			require.NoError(t, err)
			assert.Zero(t, <-ch, "nobody leads yet")
			start := time.Now()
			a, err := l.Campaign(t.Context(), "elect", "host-a")
			require.NoError(t, err)
			assert.Equal(t, core.Leader{Value: "host-a", Term: a.Token()}, <-ch)
			require.NoError(t, a.Release(t.Context()))
			assert.Zero(t, <-ch, "the resignation")
			b, err := l.Campaign(t.Context(), "elect", "host-a")
			require.NoError(t, err)
			assert.Equal(t, core.Leader{Value: "host-a", Term: b.Token()}, <-ch, "the same host's next term is a change")
			assert.Less(t, time.Since(start), time.Second, "notices, not the poll of a minute's TTL")
			cancel()
			for range ch {
			}
			require.NoError(t, b.Release(t.Context()))
		})
	})
	t.Run("sees a leader whose round never asked the herald, at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The herald is the first node by name, n0, here the last in
			// order: a sequential round that stops at quorum never asks it.
			var nodes []*memory.Node
			for i := 4; i >= 0; i-- {
				nodes = append(nodes, memory.New(memory.WithName(fmt.Sprintf("n%d", i))))
			}
			l, err := core.New(memory.AsNodes(nodes), core.WithTTL(time.Minute),
				core.WithStrategy(strategies.Sequential(strategies.WithStopAtQuorum(true))))
			require.NoError(t, err)
			defer l.Close()
			ch, err := l.Observe(t.Context(), "elect")
			require.NoError(t, err)
			assert.Zero(t, <-ch)
			start := time.Now()
			a, err := l.Campaign(t.Context(), "elect", "host-a")
			require.NoError(t, err)
			_, _, ok := nodes[4].Get("elect")
			require.False(t, ok, "the herald was not asked")
			assert.Equal(t, "host-a", (<-ch).Value)
			assert.Less(t, time.Since(start), time.Second, "a notice from a node the round asked, not the poll")
			require.NoError(t, a.Release(t.Context()))
		})
	})
	t.Run("sees an expired leader gone by the poll", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ttl := 4 * time.Second
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			a, err := l.Campaign(t.Context(), "elect", "host-a")
			require.NoError(t, err)
			ch, err := l.Observe(t.Context(), "elect")
			require.NoError(t, err)
			assert.Equal(t, "host-a", (<-ch).Value)
			for _, n := range nodes {
				n.Del("elect")
			}
			start := time.Now()
			assert.Zero(t, <-ch)
			assert.LessOrEqual(t, time.Since(start), ttl/4)
			_ = a.Release(t.Context())
		})
	})
	t.Run("closes its channel when the Locker closes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3)
			ch, err := l.Observe(t.Context(), "elect")
			require.NoError(t, err)
			<-ch
			require.NoError(t, l.Close())
			_, open := <-ch
			assert.False(t, open)
			_, err = l.Observe(t.Context(), "elect")
			require.ErrorIs(t, err, core.ErrClosed)
		})
	})
}

// Observe may read a new leader before its campaign's raise reaches the
// nodes it reads, with a term below the leader's token; it sends the same
// leader again once it reads the greater term, so that the last term it
// sent is the leader's. Before, it sent a leader again only when the
// stored value changed, and kept the low term for the whole term.
func TestObserveSettlesTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := memory.NewNodes(3)
		nodes[2].Set("{elect}:fence", "5", 0) // grants of lost rounds, on the third node alone
		cand := lockerOn(t, nodes, core.WithStrategy(strategies.Parallel()), core.WithNodeTimeout(500*time.Millisecond))
		watcher := lockerOn(t, nodes, core.WithNodeTimeout(50*time.Millisecond))
		obs, err := watcher.Observe(t.Context(), "elect")
		require.NoError(t, err)
		require.Zero(t, <-obs)
		nodes[2].Pause()
		won := make(chan *core.Lock)
		go func() {
			lock, err := cand.Campaign(t.Context(), "elect", "host-a")
			assert.NoError(t, err)
			won <- lock
		}()
		seen := <-obs // read at the others' notices, the third timed out
		time.Sleep(100 * time.Millisecond)
		nodes[2].Resume()
		lock := <-won
		time.Sleep(core.DefaultTTL / 2) // notices and polls
		synctest.Wait()
		for more := true; more; {
			select {
			case ld := <-obs:
				seen = ld
			default:
				more = false
			}
		}
		assert.Equal(t, core.Leader{Value: "host-a", Term: lock.Token()}, seen, "Observe's last leader is the leader, with its term")
		require.NoError(t, lock.Release(t.Context()))
	})
}

// Campaign under options with which a lock cannot be kept alive is
// refused before any node is asked: no term is taken, and no observer
// sees a leader that Campaign never returned.
func TestCampaignRefusesOptionsThatCannotKeepAlive(t *testing.T) {
	l, nodes := newLocker(t, 3, core.WithTTL(200*time.Millisecond), core.WithNodeTimeout(100*time.Millisecond))
	_, err := l.Campaign(t.Context(), "elect", "host-a")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, "keep a lock alive")
	for i, n := range nodes {
		_, _, ok := n.Get("{elect}:fence")
		assert.False(t, ok, "node %d: a term was taken", i)
	}
}
