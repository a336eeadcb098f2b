package core_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
)

// TestDoneWhileEndLeavesKeeper: a kept-alive lock's end leaves its mutex
// to drop the lock from the keeper; a first Done called in that gap finds
// the lock ended and returns a closed channel, which the end must not
// close again (it panicked: close of closed channel).
func TestDoneWhileEndLeavesKeeper(t *testing.T) {
	l, _ := newLocker(t, 3)
	lock, err := l.Acquire(t.Context(), "k")
	require.NoError(t, err)
	require.NoError(t, lock.KeepAlive())

	unlock := core.HoldKeeper(l) // the end waits in the keeper, after the state
	released := make(chan error, 1)
	go func() { released <- lock.Release(context.Background()) }()
	for !core.Ended(lock) {
		runtime.Gosched()
	}
	<-lock.Done() // the first Done: in the gap
	unlock()
	require.NoError(t, <-released)
}
