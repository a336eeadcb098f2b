package core_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
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

// TestPermitsBadCount: a count out of range is bad input.
func TestPermitsBadCount(t *testing.T) {
	l, _ := newLocker(t, 3)
	for _, k := range []int{0, -1, 1025} {
		_, err := l.TryAcquirePermit(t.Context(), "jobs", k)
		require.ErrorIs(t, err, core.ErrInvalidArgument, k)
		_, err = l.AcquirePermit(t.Context(), "jobs", k)
		require.ErrorIs(t, err, core.ErrInvalidArgument, k)
		_, err = l.InspectPermits(t.Context(), "jobs", k)
		require.ErrorIs(t, err, core.ErrInvalidArgument, k)
	}
}
