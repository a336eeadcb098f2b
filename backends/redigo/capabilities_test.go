package redigo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// TestWatchResubscribes restarts the server under a watch: the watch
// borrows a new connection, subscribes again, says so with one notice,
// and sees later releases.
func TestWatchResubscribes(t *testing.T) {
	t.Parallel()
	redistest.RequireServer(t)
	srv, err := redistest.StartServer(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	pool := redigo.NewPool(srv.Addr())
	t.Cleanup(func() { _ = pool.Close() })
	n, err := redigo.New(pool, redigo.WithName(srv.Addr()))
	require.NoError(t, err)

	const k = "lock"
	ch := core.ReleaseChannel(k)
	notices := make(chan struct{}, 16)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	stop, err := n.Watch(ctx, ch, func() {
		select {
		case notices <- struct{}{}:
		default:
		}
	})
	require.NoError(t, err)
	defer stop()

	require.NoError(t, srv.Restart(t.Context()))
	select {
	case <-notices:
	case <-time.After(10 * time.Second):
		t.Fatal("no notice after the watch subscribed again")
	}
	require.Eventually(t, func() bool {
		ok, err := n.SetNX(t.Context(), k, "v", time.Minute)
		return err == nil && ok
	}, 5*time.Second, 20*time.Millisecond, "the pool reconnects")
	r, err := n.Eval(t.Context(), core.ScriptRelease.Source(), []string{k}, []string{"v", ch})
	require.NoError(t, err)
	require.Equal(t, int64(1), r)
	select {
	case <-notices:
	case <-time.After(5 * time.Second):
		t.Fatal("no notice of a release after the restart")
	}
	stop()
	stop()
}

func TestCapabilitiesOnClosedPool(t *testing.T) {
	redistest.RequireServer(t)
	srv, err := redistest.StartServer(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	pool := redigo.NewPool(srv.Addr())
	n, err := redigo.New(pool)
	require.NoError(t, err)

	// A watch in place when the pool closes keeps its connection until
	// stopped, and stop still ends it.
	stop, err := n.Watch(t.Context(), core.ReleaseChannel("k"), func() {})
	require.NoError(t, err)
	require.NoError(t, pool.Close())
	stop()

	calls := []core.Call{{SHA: core.ScriptRelease.SHA(), Keys: []string{"k"}, Args: []string{"v"}}}
	n.EvalBatch(t.Context(), calls)
	require.Error(t, calls[0].Err)
	assert.Equal(t, core.KindNodeFailure, n.Classify(calls[0].Err))
	_, err = n.Watch(t.Context(), core.ReleaseChannel("k"), func() {})
	require.Error(t, err)
}
