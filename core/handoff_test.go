package core_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"
)

// TestFailedSubscription: a key's first Watch on the herald fails (issue
// 26, item 5). The subscription is made again, with backoff, so that the
// waiter already waiting and a later one are handed the lock by the
// releases instead of polling at their retry delay; while Watch keeps
// failing, the tries thin out, and they stop once no one waits.
func TestFailedSubscription(t *testing.T) {
	const delay = time.Minute // retry delay: only notices wake waiters in time
	named := func() []*memory.Node {
		// "a" is first by name: the herald.
		return []*memory.Node{memory.New(memory.WithName("c")), memory.New(memory.WithName("a")), memory.New(memory.WithName("b"))}
	}
	newLocker := func(t *testing.T, nodes []*memory.Node) *core.Locker {
		l, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, l.Close()) })
		return l
	}
	acquire := func(t *testing.T, l *core.Locker) <-chan *core.Lock {
		got := make(chan *core.Lock, 1)
		go func() {
			lock, err := l.Acquire(t.Context(), "k")
			if assert.NoError(t, err) {
				got <- lock
			}
		}()
		return got
	}

	t.Run("made again: the waiters are handed the lock", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := named()
			holder, waiter := newLocker(t, nodes), newLocker(t, nodes)
			held, err := holder.Acquire(t.Context(), "k")
			require.NoError(t, err)
			nodes[1].RefuseWatches(true)
			first := acquire(t, waiter)
			synctest.Wait()
			require.Equal(t, 1, nodes[1].Calls().Watches, "the first subscription failed")
			nodes[1].RefuseWatches(false)
			time.Sleep(time.Second)
			second := acquire(t, waiter) // a later waiter of the same Locker
			synctest.Wait()

			for _, next := range []<-chan *core.Lock{first, second} {
				released := time.Now()
				require.NoError(t, held.Release(t.Context()))
				held = <-next
				assert.Less(t, time.Since(released), 8*core.MinRetryDelay, "handed over at once, not after a retry delay")
			}
			require.NoError(t, held.Release(t.Context()))
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))
		})
	})

	// rival holds the key on every node for an hour.
	rival := func(nodes []*memory.Node) {
		for _, n := range nodes {
			n.Set("k", "rival", time.Hour)
		}
	}

	t.Run("tried again with backoff while it fails, and no more once no one waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := named()
			waiter := newLocker(t, nodes)
			rival(nodes)
			nodes[1].RefuseWatches(true)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			_, err := waiter.Acquire(ctx, "k")
			require.ErrorIs(t, err, context.DeadlineExceeded)
			tries := nodes[1].Calls().Watches
			assert.Greater(t, tries, 3, "tried again")
			assert.Less(t, tries, 10+int(30*time.Second/driver.MaxBackoff), "with backoff: not at a fixed short interval over 30 s")
			time.Sleep(time.Minute)
			synctest.Wait()
			assert.Equal(t, tries, nodes[1].Calls().Watches, "no tries once the waiter has gone")
			assert.Zero(t, waiter.Stats().Watching)
		})
	})

	t.Run("Close ends a wait before the next try", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := named()
			waiter, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
			require.NoError(t, err)
			rival(nodes)
			nodes[1].RefuseWatches(true)
			done := make(chan error, 1)
			go func() {
				_, err := waiter.Acquire(t.Context(), "k")
				done <- err
			}()
			time.Sleep(50 * time.Millisecond)
			synctest.Wait()
			require.NoError(t, waiter.Close()) // the bubble checks that no goroutine is left
			require.ErrorIs(t, <-done, core.ErrClosed)
		})
	})
}

// TestHeraldHangsUnderItsWaiters: the herald hangs while a waiter is
// queued on it (issue 26, item 6). The waiters follow the herald: a node
// turning suspect wakes them to queue on the next node by name, so that
// the release that found the herald hung is followed by a round at once
// instead of after the waiter's retry delay of a minute; and when the
// herald answers again they move back, where the holder's release hands
// the lock over.
func TestHeraldHangsUnderItsWaiters(t *testing.T) {
	const delay = time.Minute
	setup := func(t *testing.T) (l *core.Locker, nodes []*memory.Node, queued func(i int) bool, acquire func() <-chan *core.Lock) {
		// "a" is first by name: the herald; "b" the next.
		nodes = []*memory.Node{memory.New(memory.WithName("c")), memory.New(memory.WithName("a")), memory.New(memory.WithName("b"))}
		l, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, l.Close()) })
		queued = func(i int) bool {
			q, _ := driver.QueueKey("k")
			return slices.Contains(nodes[i].Keys(), q)
		}
		acquire = func() <-chan *core.Lock {
			got := make(chan *core.Lock, 1)
			go func() {
				lock, err := l.Acquire(t.Context(), "k")
				if assert.NoError(t, err) {
					got <- lock
				}
			}()
			synctest.Wait()
			return got
		}
		return l, nodes, queued, acquire
	}

	t.Run("it hangs", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes, queued, acquire := setup(t)
			held, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			next := acquire()
			require.True(t, queued(1), "queued on the herald")

			nodes[1].Pause()
			defer nodes[1].Resume()
			released := time.Now()
			require.NoError(t, held.Release(t.Context())) // finds "a" hung
			held = <-next
			assert.Less(t, time.Since(released), time.Second, "queued on the next node once the herald was suspect, not woken by its retry delay")
			assert.Equal(t, []string{"a"}, l.Stats().Suspect)
			require.NoError(t, held.Release(t.Context()))
		})
	})

	t.Run("a herd moved together does not split the votes", func(t *testing.T) {
		// Eight waiters move at once and find the lock free on the new
		// herald: parallel rounds would often split the votes, so that
		// none wins and each sleeps out its retry delay. Played ten times,
		// fresh each time: a split is likely in one of them.
		for range 10 {
			synctest.Test(t, func(t *testing.T) {
				nodes := memory.NewNodes(5)
				l, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
				require.NoError(t, err)
				defer func() { require.NoError(t, l.Close()) }()
				held, err := l.Acquire(t.Context(), "k")
				require.NoError(t, err)
				got := make(chan *core.Lock, 8)
				for range cap(got) {
					go func() {
						lock, err := l.Acquire(t.Context(), "k")
						if assert.NoError(t, err) {
							got <- lock
						}
					}()
				}
				synctest.Wait()
				herald := slices.IndexFunc(nodes, func(n *memory.Node) bool { return n.String() == slices.Min(names(nodes)) })
				nodes[herald].Pause()
				defer nodes[herald].Resume()
				released := time.Now()
				require.NoError(t, held.Release(t.Context()))
				for range cap(got) {
					require.NoError(t, (<-got).Release(t.Context()))
				}
				assert.Less(t, time.Since(released), time.Second, "taken in turn, none after its retry delay")
			})
		}
	})

	t.Run("it answers again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes, queued, acquire := setup(t)
			held, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			next := acquire()
			require.True(t, queued(1), "queued on the herald")

			nodes[1].Pause()
			_, err = l.TryAcquire(t.Context(), "other") // finds "a" hung
			require.NoError(t, err)
			synctest.Wait()
			require.True(t, queued(2), "moved to the next node by name")
			nodes[1].Resume()
			for i := 0; len(l.Stats().Suspect) > 0; i++ { // until a probe finds it answering
				require.Less(t, i, 100, "no probe found the herald answering within a second")
				time.Sleep(10 * time.Millisecond)
			}
			synctest.Wait()
			assert.False(t, queued(2), "moved back")
			released := time.Now()
			require.NoError(t, held.Release(t.Context()))
			held = <-next
			assert.Less(t, time.Since(released), 8*core.MinRetryDelay, "handed over by the herald")
			require.NoError(t, held.Release(t.Context()))
		})
	})
}

func names(nodes []*memory.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.String()
	}
	return out
}
