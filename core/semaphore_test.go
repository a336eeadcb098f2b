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
		assert.Equal(t, [][]string{{"{jobs}:fence"}, {"{jobs}:fence"}, {"{jobs}:fence"}}, keysOn(nodes))
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
