package core_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
)

// TestKindsReleaseHandsOver: a set's or the last reader's release that
// hands the key to a queued writer answers 2 on the herald, as a mutex's
// release does; the release succeeds there (on one node, the quorum), and
// the writer gets the key.
func TestKindsReleaseHandsOver(t *testing.T) {
	take := map[string]func(*core.Locker, context.Context) (*core.Lock, error){
		"set":    func(l *core.Locker, ctx context.Context) (*core.Lock, error) { return l.AcquireAll(ctx, "a", "b") },
		"shared": func(l *core.Locker, ctx context.Context) (*core.Lock, error) { return l.AcquireShared(ctx, "a") },
	}
	for kind, acquire := range take {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, _ := newLocker(t, 1, core.WithTTL(10*time.Second)) // the herald is the quorum
				held, err := acquire(l, t.Context())
				require.NoError(t, err)
				writer := make(chan error, 1)
				go func() {
					w, err := l.Acquire(t.Context(), "a")
					if err == nil {
						err = w.Release(t.Context())
					}
					writer <- err
				}()
				synctest.Wait() // the writer lost its round and queued
				start := time.Now()
				require.NoError(t, held.Release(t.Context()), "the release that hands over")
				require.NoError(t, <-writer)
				require.Less(t, time.Since(start), time.Second, "handed over, not polled")
			})
		})
	}
}
