package core_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// TestPermits: K permits admit K holders; the next waits until one is
// released, and TryAcquirePermit finds a free slot whichever it tries first.
func TestPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, nodes := newLocker(t, 3, core.WithFencing(true))
		ctx := t.Context()
		a, err := l.TryAcquirePermit(ctx, "jobs", 2)
		require.NoError(t, err)
		b, err := l.TryAcquirePermit(ctx, "jobs", 2)
		require.NoError(t, err)
		assert.Equal(t, "jobs", a.Key())
		assert.NotEqual(t, a.Token(), b.Token())
		_, err = l.TryAcquirePermit(ctx, "jobs", 2)
		require.ErrorIs(t, err, core.ErrNotAcquired)

		states, err := l.InspectPermits(ctx, "jobs", 2)
		require.NoError(t, err)
		require.Len(t, states, 2)
		assert.True(t, states[0].Held() && states[1].Held())
		assert.Equal(t, "{jobs}:permit:1", states[1].Key)

		done := make(chan *core.Lock)
		go func() {
			c, err := l.AcquirePermit(ctx, "jobs", 2)
			assert.NoError(t, err)
			done <- c
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a third holder while two hold")
		default:
		}
		require.NoError(t, a.Release(context.Background()))
		c := <-done
		assert.Greater(t, c.Token(), b.Token())
		require.NoError(t, b.Release(ctx))
		require.NoError(t, c.Release(ctx))
		assert.Equal(t, [][]string{{"{jobs}:permits:fence"}, {"{jobs}:permits:fence"}, {"{jobs}:permits:fence"}}, keysOn(nodes))
	})
}

// TestMisusePermits: a count of permits out of range, or a key whose
// slots cannot share its cluster slot, is refused before any node is asked.
func TestMisusePermits(t *testing.T) {
	refused := func(t *testing.T, key string, permits int, msg string) {
		l, nodes := newLocker(t, 3)
		requireMisuse(t, call(t, func(ctx context.Context) error { _, err := l.TryAcquirePermit(ctx, key, permits); return err }), core.ErrInvalidArgument, msg)
		requireMisuse(t, call(t, func(ctx context.Context) error { _, err := l.AcquirePermit(ctx, key, permits); return err }), core.ErrInvalidArgument, msg)
		requireMisuse(t, call(t, func(ctx context.Context) error { _, err := l.InspectPermits(ctx, key, permits); return err }), core.ErrInvalidArgument, msg)
		assert.Equal(t, memory.Calls{}, nodes[0].Calls(), "no node is asked")
	}
	t.Run("permits_out_of_range", func(t *testing.T) {
		refused(t, "jobs", 0, "quorumlock: invalid argument: permits 0 must be 1 to 1024")
		refused(t, "jobs", -1, "quorumlock: invalid argument: permits -1 must be 1 to 1024")
	})
	t.Run("permits_over_1024", func(t *testing.T) {
		refused(t, "jobs", 1025, "quorumlock: invalid argument: permits 1025 must be 1 to 1024")
	})
	t.Run("permit_key_with_brace", func(t *testing.T) {
		refused(t, "a}b", 2, `quorumlock: invalid argument: key "a}b" has no hash tag and contains "}", so its permit slots cannot share its cluster slot; put the key in a hash tag, such as {a}b}`)
	})
}

// TestPermitHandedOver: a waiter queued on a semaphore whose every permit
// is held is handed one at the first release, long before its retry
// delay; the enqueue finds the semaphore held only when every slot is.
func TestPermitHandedOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newLocker(t, 3, core.WithRetryDelay(strategies.JitterDelay(30*time.Second, 30*time.Second)), core.WithTries(10))
		ctx := t.Context()
		a, err := l.TryAcquirePermit(ctx, "jobs", 2)
		require.NoError(t, err)
		b, err := l.TryAcquirePermit(ctx, "jobs", 2)
		require.NoError(t, err)
		done := make(chan *core.Lock)
		go func() {
			c, err := l.AcquirePermit(ctx, "jobs", 2)
			assert.NoError(t, err)
			done <- c
		}()
		synctest.Wait() // queued, or waiting out its retry delay
		released := time.Now()
		require.NoError(t, a.Release(ctx))
		c := <-done
		assert.Less(t, time.Since(released), time.Second, "handed the permit at the release, not after the retry delay")
		require.NoError(t, b.Release(ctx))
		require.NoError(t, c.Release(ctx))
	})
}

// TestTryAcquirePermitSweeps: TryAcquirePermit takes every free permit
// whichever slot its sweep starts at: K calls take all K permits, again
// and again.
func TestTryAcquirePermitSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newLocker(t, 3)
		ctx := t.Context()
		for range 10 {
			var held []*core.Lock
			for i := range 4 {
				p, err := l.TryAcquirePermit(ctx, "jobs", 4)
				require.NoError(t, err, "permit %d of 4 is free", i)
				held = append(held, p)
			}
			_, err := l.TryAcquirePermit(ctx, "jobs", 4)
			require.ErrorIs(t, err, core.ErrNotAcquired)
			for _, p := range held {
				require.NoError(t, p.Release(ctx))
			}
		}
	})
}

// A semaphore's queue, notices and fencing counter are its own: a plain
// lock of the same name, queued first, does not take the hand-off of a
// released permit (the permit's waiter would then sleep out its retry
// delay, an hour here), and a permit does not move the term of a leader
// of the same name.
func TestSemaphoreKeysAreItsOwn(t *testing.T) {
	t.Run("queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := memory.NewNodes(3)
			slow := core.WithRetryDelay(strategies.JitterDelay(time.Hour, time.Hour))
			a, b, c := lockerOn(t, nodes, slow), lockerOn(t, nodes, slow), lockerOn(t, nodes, slow)
			m, err := a.Acquire(t.Context(), "jobs")
			require.NoError(t, err)
			p, err := a.AcquirePermit(t.Context(), "jobs", 1)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			plain := make(chan error, 1)
			go func() { _, err := b.Acquire(ctx, "jobs"); plain <- err }()
			synctest.Wait() // the plain waiter queued first
			got := make(chan *core.Lock, 1)
			go func() {
				q, err := c.AcquirePermit(ctx, "jobs", 1)
				assert.NoError(t, err)
				got <- q
			}()
			synctest.Wait()
			require.NoError(t, p.Release(t.Context()))
			released := time.Now()
			q := <-got
			assert.Less(t, time.Since(released), time.Second, "the permit's waiter is handed the free permit")
			require.NoError(t, q.Release(t.Context()))
			cancel()
			require.ErrorIs(t, <-plain, context.Canceled)
			require.NoError(t, m.Release(t.Context()))
		})
	})
	t.Run("fence", func(t *testing.T) {
		l, _ := newLocker(t, 3, core.WithFencing(true))
		lead, err := l.Campaign(t.Context(), "elect", "host-a")
		require.NoError(t, err)
		p, err := l.AcquirePermit(t.Context(), "elect", 2)
		require.NoError(t, err)
		ld, err := l.Leader(t.Context(), "elect")
		require.NoError(t, err)
		assert.Equal(t, lead.Token(), ld.Term, "the leader's term is its token")
		require.NoError(t, p.Release(t.Context()))
		require.NoError(t, lead.Release(t.Context()))
	})
}
