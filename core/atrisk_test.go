package core_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
)

// The at-risk notice (issue 26, item 8): once an extension has failed, a
// lock ends when less than the at-risk margin of validity is left, so its
// holder has that long to stop before a second client may hold it. These
// run in synctest bubbles: every instant asserted is exact.

func TestAtRiskNotice(t *testing.T) {
	const ttl = 3 * time.Second
	margin := ttl / core.DefaultAtRiskDivisor
	t.Run("Do with two of three nodes stopped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			start := time.Now()
			var cause error
			var noticed time.Duration
			err := l.Do(t.Context(), "k", func(ctx context.Context) error {
				time.Sleep(200 * time.Millisecond)
				nodes[0].Stop()
				nodes[1].Stop()
				<-ctx.Done()
				noticed, cause = time.Since(start), context.Cause(ctx)
				return ctx.Err()
			})
			// The lock is valid until TTL - drift after the acquisition: fn
			// hears it with the margin left, not when validity is gone.
			assert.Equal(t, ttl-drift(ttl)-margin, noticed, "fn's context is cancelled with the margin left")
			require.ErrorIs(t, cause, core.ErrLockAtRisk)
			require.ErrorIs(t, cause, core.ErrLockLost)
			require.ErrorIs(t, cause, core.ErrUnavailable, "the extensions' failure is inside")
			require.ErrorIs(t, err, core.ErrLockAtRisk, "Do says so too")
		})
	})
	t.Run("Lock.Context of a kept lock", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			start := time.Now()
			lock := keptAlive(t, l, "k")
			ctx, cancel := lock.Context(t.Context())
			defer cancel()
			time.Sleep(200 * time.Millisecond)
			nodes[0].Stop()
			nodes[1].Stop()
			<-ctx.Done()
			assert.Equal(t, ttl-drift(ttl)-margin, time.Since(start))
			require.ErrorIs(t, context.Cause(ctx), core.ErrLockAtRisk)
			require.ErrorIs(t, context.Cause(ctx), core.ErrLockLost)
			<-lock.Done()
			require.ErrorIs(t, lock.Err(), core.ErrLockAtRisk)
			assert.Equal(t, margin, lock.Validity(), "still valid: the time left to stop")
			assert.Zero(t, l.Stats().KeptAlive, "the keep-alive stopped")
			require.ErrorIs(t, lock.Extend(t.Context()), core.ErrLockAtRisk)
			for _, n := range nodes {
				v, _, ok := n.Get("k")
				assert.True(t, ok && v == lock.Value(), "not released under its holder")
			}
			nodes[0].StartKeepingData()
			require.NoError(t, lock.Release(t.Context()), "the holder releases it")
			assert.Zero(t, lock.Validity())
			require.ErrorIs(t, lock.Err(), core.ErrLockAtRisk, "the first cause stays")
		})
	})
	t.Run("a failed extension below the margin ends the lock at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			done := lock.Done()
			nodes[0].Stop()
			nodes[1].Stop()
			time.Sleep(ttl - drift(ttl) - margin/2)
			require.NoError(t, lock.Err(), "no extension failed: it lives out its validity")
			require.ErrorIs(t, lock.Extend(t.Context()), core.ErrUnavailable)
			synctest.Wait()
			select {
			case <-done:
			default:
				t.Fatal("Done still open after a failed extension below the margin")
			}
			require.ErrorIs(t, lock.Err(), core.ErrLockAtRisk)
			assert.Equal(t, margin/2, lock.Validity())
		})
	})
	t.Run("Err notices without a timer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			nodes[0].Stop()
			nodes[1].Stop()
			require.ErrorIs(t, lock.Extend(t.Context()), core.ErrUnavailable)
			time.Sleep(ttl - drift(ttl) - margin - time.Millisecond)
			require.NoError(t, lock.Err())
			time.Sleep(time.Millisecond)
			require.ErrorIs(t, lock.Err(), core.ErrLockAtRisk)
			<-lock.Done()
		})
	})
	t.Run("WithAtRiskMargin", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const custom = time.Second
			l, nodes := newLocker(t, 3, core.WithTTL(ttl), core.WithAtRiskMargin(custom))
			start := time.Now()
			lock := keptAlive(t, l, "k")
			nodes[0].Stop()
			nodes[1].Stop()
			<-lock.Done()
			assert.Equal(t, ttl-drift(ttl)-custom, time.Since(start))
			require.ErrorIs(t, lock.Err(), core.ErrLockAtRisk)
		})
	})
}

// A lock whose extensions succeed is never announced at risk, nor one
// whose failed extension was followed by a successful one before its
// validity fell below the margin.
func TestAtRiskNotForHealthyLocks(t *testing.T) {
	const ttl = 3 * time.Second
	interval := ttl / core.DefaultKeepAliveDivisor
	t.Run("a healthy kept lock, its nodes slow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The longest interval New accepts: each extension ends with
			// just above the margin of validity left.
			margin := ttl / core.DefaultAtRiskDivisor
			longest := ttl - drift(ttl) - margin - core.DefaultNodeTimeout - time.Millisecond
			l, nodes := newLocker(t, 3, core.WithTTL(ttl), core.WithKeepAlive(longest))
			lock := keptAlive(t, l, "k")
			ctx, cancel := lock.Context(t.Context())
			defer cancel()
			for _, n := range nodes {
				n.SetLatency(core.DefaultNodeTimeout - time.Millisecond)
			}
			time.Sleep(100 * ttl)
			require.NoError(t, context.Cause(ctx))
			require.NoError(t, lock.Err())
			// A renewal waiting out a latency holds the lock's mutex,
			// which a bubble does not count as blocked: no Release then.
			for _, n := range nodes {
				n.SetLatency(0)
			}
			time.Sleep(ttl)
			require.NoError(t, lock.Release(t.Context()))
		})
	})
	t.Run("a failed extension, then a successful one", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := newLocker(t, 3, core.WithTTL(ttl))
			lock := keptAlive(t, l, "k")
			ctx, cancel := lock.Context(t.Context())
			defer cancel()
			nodes[0].Pause()
			nodes[1].Pause()
			time.Sleep(interval + 100*time.Millisecond) // the first extension failed
			require.Less(t, lock.Validity(), ttl-drift(ttl)-interval, "not extended")
			nodes[0].Resume()
			nodes[1].Resume()
			time.Sleep(10 * ttl)
			require.NoError(t, context.Cause(ctx), "a retry reached a quorum above the margin")
			require.NoError(t, lock.Err())
			require.NoError(t, lock.Release(t.Context()))
		})
	})
}

// An extension's error is complete before it becomes the lock's cause: a
// goroutine that reads the cause once Done is closed must not race with
// Extend (run with -race).
func TestLostCauseCompleteWhenPublished(t *testing.T) {
	l, nodes := newLocker(t, 3)
	lock, err := l.Acquire(t.Context(), "k")
	require.NoError(t, err)
	for _, n := range nodes {
		n.Set("k", "rival", time.Minute)
	}
	read := make(chan error)
	go func() {
		<-lock.Done()
		cause := lock.Err()
		_ = errors.Is(cause, context.Canceled) // reads every field Unwrap shows
		read <- cause
	}()
	require.ErrorIs(t, lock.Extend(t.Context()), core.ErrLockLost)
	require.ErrorIs(t, <-read, core.ErrLockLost)
}
