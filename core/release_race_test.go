package core_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
)

// Release of the last kept-alive lock waits for the keep-alive goroutine
// to end, but not for another lock whose KeepAlive starts meanwhile: it
// returns while that lock is kept (a leader's Campaign keeps its lock
// alive as it returns, so the race came from the model test, seed 4622).
func TestReleaseWhileAnotherKeepAliveStarts(t *testing.T) {
	for i := range 300 {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3, core.WithTTL(time.Second))
			a, err := l.Acquire(t.Context(), "a")
			require.NoError(t, err)
			require.NoError(t, a.KeepAlive())
			b, err := l.Acquire(t.Context(), "b")
			require.NoError(t, err)
			released := make(chan error, 1)
			go func() { released <- a.Release(t.Context()) }()
			go func() { _ = b.KeepAlive() }()
			synctest.Wait()
			select {
			case err := <-released:
				require.NoError(t, err)
			default:
				require.NoError(t, b.Release(t.Context()))
				<-released
				t.Fatalf("round %d: Release of a waited for the keep-alive of b, and returned only once b was released", i)
			}
			require.NoError(t, b.Release(t.Context()))
		})
	}
}
