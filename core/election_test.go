package core_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
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
	t.Run("bad values and keys are refused", func(t *testing.T) {
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
	t.Run("Leader refuses a key a plain lock holds", func(t *testing.T) {
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
