package core_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// lockerOn returns a Locker over nodes, closed at the end of the test.
func lockerOn(t *testing.T, nodes []*memory.Node, opts ...core.Option) *core.Locker {
	t.Helper()
	l, err := core.New(memory.AsNodes(nodes), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// Every key of a set hands over its own queue: a set waiter queues on
// the key that refused it, and a set's release wakes the waiters of
// every one of its keys. The retry delay is an hour: only a hand-off gets
// anyone in within the bound.
func TestSetHandOffOnEveryKey(t *testing.T) {
	const hour = time.Hour
	slow := core.WithRetryDelay(strategies.JitterDelay(hour, hour))
	t.Run("a set waiter blocked by its second key is handed it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := memory.NewNodes(3)
			holder, waiter := lockerOn(t, nodes), lockerOn(t, nodes, slow)
			b, err := holder.Acquire(t.Context(), "b")
			require.NoError(t, err)
			got := make(chan *core.Lock)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				set, err := waiter.AcquireAll(ctx, "a", "b")
				assert.NoError(t, err)
				got <- set
			}()
			time.Sleep(time.Second) // the set lost its round and queued on b
			synctest.Wait()
			released := time.Now()
			require.NoError(t, b.Release(t.Context()))
			set := <-got
			require.NotNil(t, set)
			assert.Less(t, time.Since(released), core.MinRetryDelay*10, "handed b, not polled")
			require.NoError(t, set.Release(t.Context()))
		})
	})
	t.Run("a set's release hands its second key to a plain waiter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := memory.NewNodes(3)
			holder, waiter := lockerOn(t, nodes), lockerOn(t, nodes, slow)
			set, err := holder.AcquireAll(t.Context(), "a", "b")
			require.NoError(t, err)
			got := make(chan *core.Lock)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				b, err := waiter.Acquire(ctx, "b")
				assert.NoError(t, err)
				got <- b
			}()
			time.Sleep(time.Second) // the plain waiter queued on b
			synctest.Wait()
			released := time.Now()
			require.NoError(t, set.Release(t.Context()))
			b := <-got
			require.NotNil(t, b)
			assert.Less(t, time.Since(released), core.MinRetryDelay*10, "handed b, not polled")
			require.NoError(t, b.Release(t.Context()))
		})
	})
}

// A set waits while a stream of smaller sets that overlap it keeps one of
// its keys held at every moment: {a,b} holds 3 of every 4 units, {c} the
// same, 2 units later. Without priority the big set never finds its keys
// free together; with it, its marks refuse the next small set, and it gets
// in when the holder before it leaves.
func TestSetNotStarvedBySmallerSets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const unit = 100 * time.Millisecond
		nodes := memory.NewNodes(3)
		stream, big := lockerOn(t, nodes), lockerOn(t, nodes)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		start := time.Now()
		for _, w := range []struct {
			keys   []string
			offset time.Duration
		}{{[]string{"a", "b"}, 0}, {[]string{"c"}, 2 * unit}} {
			wg.Go(func() {
				for slot := start.Add(w.offset); ; slot = slot.Add(4 * unit) {
					select {
					case <-stop:
						return
					case <-time.After(time.Until(slot)):
					}
					lock, err := stream.TryAcquireAll(context.Background(), w.keys...)
					if err != nil {
						continue // refused: a waiting set comes first
					}
					time.Sleep(3 * unit)
					assert.NoError(t, lock.Release(context.Background()))
				}
			})
		}
		time.Sleep(unit) // {a,b} holds
		ctx, cancel := context.WithTimeout(t.Context(), 40*unit)
		defer cancel()
		set, err := big.AcquireAll(ctx, "a", "b", "c")
		close(stop)
		wg.Wait()
		require.NoError(t, err, "the big set got in within 40 units")
		// Its marks take priority once it has waited for a mark's expiry (a
		// fifth of the default TTL): then in as soon as {a,b} leaves.
		const patience = core.DefaultTTL / 5
		assert.Less(t, time.Since(start), patience+6*unit, "in as soon as {a,b} left after its patience")
		require.NoError(t, set.Release(t.Context()))
	})
}

// A set waiting for a key that readers hold keeps new readers out, as a
// waiting writer does, and gets in when the readers it waited for leave.
func TestSetNotStarvedByReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := memory.NewNodes(3)
		readers, big := lockerOn(t, nodes), lockerOn(t, nodes)
		r, err := readers.AcquireShared(t.Context(), "k")
		require.NoError(t, err)
		got := make(chan *core.Lock)
		go func() {
			set, err := big.AcquireAll(context.Background(), "a", "k")
			assert.NoError(t, err)
			got <- set
		}()
		synctest.Wait() // the set lost its round to the reader, and waits
		_, err = readers.TryAcquireShared(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrNotAcquired, "a new reader behind a waiting set")
		require.NoError(t, r.Release(t.Context()))
		set := <-got
		require.NoError(t, set.Release(t.Context()))
	})
}

// A set that has waited for less than a mark's expiry holds back no other
// set: under contention that ends quickly, every set goes in its turn, and
// priority is only for a set that has waited long. With priority from its
// first lost round, the waiting sets took turns behind the oldest, each
// hop paced by a retry delay: a fifteenth of the throughput, in a run of
// 16 Lockers taking sets of 2 to 3 of 4 keys.
func TestYoungWaitingSetHoldsNoSetBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := memory.NewNodes(3)
		holder, waiter, other := lockerOn(t, nodes), lockerOn(t, nodes), lockerOn(t, nodes)
		a, err := holder.Acquire(t.Context(), "a")
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			set, err := waiter.AcquireAll(context.Background(), "a", "b")
			if assert.NoError(t, err) {
				assert.NoError(t, set.Release(context.Background()))
			}
		}()
		synctest.Wait() // the set {a,b} lost its round to the holder of a, and waits
		b, err := other.TryAcquireAll(t.Context(), "b", "c")
		require.NoError(t, err, "a set that came later takes b: the waiting set is young")
		require.NoError(t, b.Release(t.Context()))

		time.Sleep(core.DefaultTTL/5 + core.DefaultRetryMax) // its patience, and a lost round since
		synctest.Wait()
		_, err = other.TryAcquireAll(t.Context(), "b", "c")
		require.ErrorIs(t, err, core.ErrNotAcquired, "the set has waited long: its marks hold later sets back")
		require.NoError(t, a.Release(t.Context()))
		<-done // the set gets in
	})
}
