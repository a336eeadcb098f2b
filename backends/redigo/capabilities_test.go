package redigo_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core/driver"
)

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
	stop, err := n.Watch(t.Context(), driver.ReleaseChannel("k"), func(string) {})
	require.NoError(t, err)
	require.NoError(t, pool.Close())
	stop()

	calls := []driver.Call{{SHA: driver.ScriptRelease.SHA(), Keys: []string{"k"}, Args: []string{"v"}}}
	n.EvalBatch(t.Context(), calls)
	require.Error(t, calls[0].Err)
	assert.Equal(t, driver.KindNodeFailure, n.Classify(calls[0].Err))
	_, err = n.Watch(t.Context(), driver.ReleaseChannel("k"), func(string) {})
	require.Error(t, err)
}
