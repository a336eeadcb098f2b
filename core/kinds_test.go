package core_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// liveKeys returns the keys node n holds that are lock keys (not the
// identity or birth keys the protocol keeps beside them).
func liveKeys(n *memory.Node) []string {
	var out []string
	for _, k := range n.Keys() {
		if k != driver.IdentityKey && k != driver.BirthKey {
			out = append(out, k)
		}
	}
	return out
}

func TestMultiKeyLocks(t *testing.T) {
	t.Run("overlapping sets never both hold, and a refused set writes nothing", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		ab, err := l.AcquireAll(t.Context(), "b", "a")
		require.NoError(t, err)
		assert.Equal(t, "a,b", ab.Key())
		assert.Equal(t, []string{"a", "b"}, ab.Keys())
		_, err = l.TryAcquireAll(t.Context(), "c", "b")
		require.ErrorIs(t, err, core.ErrNotAcquired)
		for _, n := range nodes {
			assert.NotContains(t, liveKeys(n), "c", "a refused set left a partial grant on %s", n)
		}
		_, err = l.TryAcquire(t.Context(), "a")
		require.ErrorIs(t, err, core.ErrNotAcquired, "a mutex on a key of a held set")
		require.NoError(t, ab.Release(t.Context()))
		for _, n := range nodes {
			assert.Empty(t, liveKeys(n), "the release left keys on %s", n)
		}
		bc, err := l.TryAcquireAll(t.Context(), "c", "b")
		require.NoError(t, err)
		require.NoError(t, bc.Release(t.Context()))
	})
	t.Run("a set waits for a mutex on one of its keys", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		b, err := l.Acquire(t.Context(), "b")
		require.NoError(t, err)
		_, err = l.TryAcquireAll(t.Context(), "a", "b")
		require.ErrorIs(t, err, core.ErrNotAcquired)
		for _, n := range nodes {
			assert.Equal(t, []string{"b"}, liveKeys(n))
		}
		require.NoError(t, b.Release(t.Context()))
	})
	t.Run("bad sets are refused", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		for _, keys := range [][]string{nil, {"a", ""}, {"a", "b", "a"}} {
			_, err := l.AcquireAll(t.Context(), keys...)
			require.ErrorIs(t, err, core.ErrInvalidArgument, "%q", keys)
		}
	})
	t.Run("kept alive, fenced and released with every strategy", func(t *testing.T) {
		for _, s := range allStrategies() {
			synctest.Test(t, func(t *testing.T) {
				l, _ := newLocker(t, 3, core.WithStrategy(s), core.WithFencing(true), core.WithTTL(time.Second))
				one, err := l.Acquire(t.Context(), "{o}:1")
				require.NoError(t, err)
				require.NoError(t, one.Release(t.Context()))
				set, err := l.AcquireAll(t.Context(), "{o}:1", "{o}:2")
				require.NoError(t, err, "%s", s)
				assert.Greater(t, set.Token(), one.Token(), "a set's token exceeds every earlier token of its keys")
				require.NoError(t, set.KeepAlive())
				time.Sleep(3 * time.Second)
				require.NoError(t, set.Err(), "kept alive past its TTL")
				two, err := l.TryAcquire(t.Context(), "{o}:2")
				require.ErrorIs(t, err, core.ErrNotAcquired, "%v", two)
				require.NoError(t, set.Release(t.Context()))
			})
		}
	})
}

func TestSharedLocks(t *testing.T) {
	t.Run("readers share, a writer excludes them", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		r1, err := l.TryAcquireShared(t.Context(), "k")
		require.NoError(t, err)
		r2, err := l.TryAcquireShared(t.Context(), "k")
		require.NoError(t, err)
		assert.True(t, r1.Shared())
		_, err = l.TryAcquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrNotAcquired, "a writer while readers hold")
		require.NoError(t, r1.Release(t.Context()))
		_, err = l.TryAcquire(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrNotAcquired, "a writer while one reader holds")
		require.NoError(t, r2.Release(t.Context()))
		w, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err, "a writer once the readers left")
		_, err = l.TryAcquireShared(t.Context(), "k")
		require.ErrorIs(t, err, core.ErrNotAcquired, "a reader while a writer holds")
		require.NoError(t, w.Release(t.Context()))
	})
	t.Run("a waiting writer keeps new readers out; one that gives up does not", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3)
			r, err := l.TryAcquireShared(t.Context(), "k")
			require.NoError(t, err)
			_, err = l.TryAcquire(t.Context(), "k")
			require.ErrorIs(t, err, core.ErrNotAcquired)
			r2, err := l.TryAcquireShared(t.Context(), "k")
			require.NoError(t, err, "TryAcquire does not wait: it leaves no mark")
			require.NoError(t, r2.Release(t.Context()))

			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, err := l.Acquire(ctx, "k")
				assert.ErrorIs(t, err, context.Canceled)
			}()
			synctest.Wait() // the writer lost a round and waits
			_, err = l.TryAcquireShared(t.Context(), "k")
			require.ErrorIs(t, err, core.ErrNotAcquired, "a new reader behind a waiting writer")
			require.NoError(t, r.Extend(t.Context()), "a reader already in stays")
			cancel()
			<-done
			require.NoError(t, r.Release(t.Context()))
		})
	})
	t.Run("a writer that gives up holds readers back a fifth of the TTL at most", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3, core.WithTries(2)) // TTL 10 s: the mark lasts 2 s
			r, err := l.TryAcquireShared(t.Context(), "k")
			require.NoError(t, err)
			marked := time.Now()
			_, err = l.Acquire(t.Context(), "k") // its first round marks, its last does not
			require.ErrorIs(t, err, core.ErrNotAcquired)
			_, err = l.TryAcquireShared(t.Context(), "k")
			require.ErrorIs(t, err, core.ErrNotAcquired, "the mark still holds")
			time.Sleep(time.Until(marked.Add(2*time.Second + 10*time.Millisecond)))
			r2, err := l.TryAcquireShared(t.Context(), "k")
			require.NoError(t, err, "the mark has lapsed")
			require.NoError(t, r.Release(t.Context()))
			require.NoError(t, r2.Release(t.Context()))
		})
	})
	t.Run("the last reader's release hands the key to a waiting writer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3)
			r, err := l.AcquireShared(t.Context(), "k")
			require.NoError(t, err)
			got := make(chan *core.Lock)
			go func() {
				w, err := l.Acquire(context.Background(), "k")
				assert.NoError(t, err)
				got <- w
			}()
			synctest.Wait()
			start := time.Now()
			require.NoError(t, r.Release(t.Context()))
			w := <-got
			assert.Less(t, time.Since(start), core.MinRetryDelay*10, "handed over, not polled")
			require.NoError(t, w.Release(t.Context()))
		})
	})
	t.Run("a writer's release hands the key to every reader queued together", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3)
			w, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			got := make(chan *core.Lock)
			for range 2 {
				go func() {
					r, err := l.AcquireShared(context.Background(), "k")
					assert.NoError(t, err)
					got <- r
				}()
			}
			synctest.Wait() // both readers queued
			start := time.Now()
			require.NoError(t, w.Release(t.Context()))
			r1, r2 := <-got, <-got
			assert.Less(t, time.Since(start), core.MinRetryDelay*10, "both handed over, neither polled")
			require.NoError(t, r1.Release(t.Context()))
			require.NoError(t, r2.Release(t.Context()))
		})
	})
	t.Run("readers handed the key pass the mark of the writer before them", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3)
			r, err := l.AcquireShared(t.Context(), "k")
			require.NoError(t, err)
			writer := make(chan *core.Lock)
			go func() {
				w, err := l.Acquire(context.Background(), "k") // loses to r: marks, queues
				assert.NoError(t, err)
				writer <- w
			}()
			synctest.Wait()
			require.NoError(t, r.Release(t.Context()))
			w := <-writer
			readers := make(chan *core.Lock)
			for range 2 {
				go func() {
					r, err := l.AcquireShared(context.Background(), "k")
					assert.NoError(t, err)
					readers <- r
				}()
			}
			synctest.Wait()
			start := time.Now()
			require.NoError(t, w.Release(t.Context()))
			r1, r2 := <-readers, <-readers
			assert.Less(t, time.Since(start), core.MinRetryDelay*10, "handed over despite the writer's fresh mark")
			require.NoError(t, r1.Release(t.Context()))
			require.NoError(t, r2.Release(t.Context()))
		})
	})
	t.Run("a reader does not yield to readers this Locker just handed the key", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3)
			w, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			got := make(chan *core.Lock)
			go func() {
				r, err := l.AcquireShared(context.Background(), "k")
				assert.NoError(t, err)
				got <- r
			}()
			synctest.Wait()
			require.NoError(t, w.Release(t.Context())) // handed to the reader
			r1 := <-got
			start := time.Now()
			r2, err := l.AcquireShared(t.Context(), "k")
			require.NoError(t, err)
			assert.Less(t, time.Since(start), core.MinRetryDelay*10, "shares at once, queues behind no one")
			require.NoError(t, r1.Release(t.Context()))
			require.NoError(t, r2.Release(t.Context()))
		})
	})
	t.Run("fencing: a writer's token exceeds every reader's", func(t *testing.T) {
		l, _ := newLocker(t, 3, core.WithFencing(true))
		r1, err := l.TryAcquireShared(t.Context(), "k")
		require.NoError(t, err)
		r2, err := l.TryAcquireShared(t.Context(), "k")
		require.NoError(t, err)
		assert.Greater(t, r2.Token(), r1.Token())
		require.NoError(t, r1.Release(t.Context()))
		require.NoError(t, r2.Release(t.Context()))
		w, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		assert.Greater(t, w.Token(), r2.Token())
		require.NoError(t, w.Release(t.Context()))
	})
	t.Run("readers are kept alive in the keeper's batches and lost when gone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(time.Second))
			r, err := l.AcquireShared(t.Context(), "k")
			require.NoError(t, err)
			m, err := l.Acquire(t.Context(), "m")
			require.NoError(t, err)
			require.NoError(t, r.KeepAlive())
			require.NoError(t, m.KeepAlive())
			time.Sleep(3 * time.Second)
			require.NoError(t, r.Err())
			st := l.Stats()
			assert.Equal(t, 2*st.RenewalTicks, st.Renewals, "a reader and a mutex renewed in the same batches")
			for _, n := range nodes[:2] {
				readers, _ := driver.ReadersKey("k")
				n.Del(readers)
			}
			<-r.Done()
			require.ErrorIs(t, r.Err(), core.ErrLockLost)
			require.NoError(t, m.Release(t.Context()))
		})
	})
	t.Run("Inspect lists the readers", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		r1, err := l.TryAcquireShared(t.Context(), "k")
		require.NoError(t, err)
		r2, err := l.TryAcquireShared(t.Context(), "k")
		require.NoError(t, err)
		st, err := l.Inspect(t.Context(), "k")
		require.NoError(t, err)
		for _, n := range st.Nodes {
			assert.Equal(t, driver.SharedValue, n.Value)
			got := slices.Sorted(maps.Keys(n.Readers))
			assert.Equal(t, slices.Sorted(slices.Values([]string{r1.Value(), r2.Value()})), got)
		}
		require.NoError(t, r1.Release(t.Context()))
		require.NoError(t, r2.Release(t.Context()))
	})
}

// Close, Release and KeepAlive at once on the new kinds: Close releases
// every set and reader still held, whatever ran beside it, and no key is
// left on any node.
func TestKindsCloseWithReleaseAndKeepAlive(t *testing.T) {
	for range 20 {
		nodes := memory.NewNodes(3)
		l, err := core.New(memory.AsNodes(nodes))
		require.NoError(t, err)
		set, err := l.AcquireAll(t.Context(), "{o}:1", "{o}:2")
		require.NoError(t, err)
		r1, err := l.AcquireShared(t.Context(), "k")
		require.NoError(t, err)
		r2, err := l.AcquireShared(t.Context(), "k")
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Go(func() { _ = r1.Release(context.Background()) })
		wg.Go(func() { _ = set.KeepAlive(); _ = r2.KeepAlive() })
		require.NoError(t, l.Close())
		wg.Wait()
		for _, n := range nodes {
			assert.Empty(t, liveKeys(n), "Close left keys on %s", n)
		}
	}
}
