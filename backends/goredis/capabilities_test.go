package goredis_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core/driver"
)

// plainClient hides every method of a client but those of goredis.Client,
// as a client implemented by a user would.
type plainClient struct{ goredis.Client }

func startServer(t *testing.T) *redistest.Server {
	t.Helper()
	redistest.RequireServer(t)
	srv, err := redistest.StartServer(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	return srv
}

func TestCapabilitiesWithoutClientMethods(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	rdb := redis.NewClient(goredis.ClientOptions(srv.Addr()))
	t.Cleanup(func() { _ = rdb.Close() })
	n, err := goredis.New(plainClient{rdb})
	require.NoError(t, err)
	ctx := t.Context()

	// Without Pipeline, the calls go one by one, with the same results.
	ok, err := n.SetNX(ctx, "k", "mine", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	calls := []driver.Call{
		{Source: driver.ScriptExtend.Source(), Keys: []string{"k"}, Args: []string{"mine", "60000"}},
		{SHA: "0000000000000000000000000000000000000000", Keys: []string{"k"}},
		{SHA: driver.ScriptRelease.SHA(), Keys: []string{"k"}, Args: []string{"theirs"}},
	}
	_, err = n.Eval(ctx, driver.ScriptRelease.Source(), []string{"other"}, []string{"x"})
	require.NoError(t, err)
	n.EvalBatch(ctx, calls)
	require.NoError(t, calls[0].Err)
	assert.Equal(t, int64(1), calls[0].Reply)
	assert.Equal(t, driver.KindNoScript, n.Classify(calls[1].Err))
	require.NoError(t, calls[2].Err)
	assert.Equal(t, int64(0), calls[2].Reply)

	// Without Subscribe, Watch is unsupported.
	stop, err := n.Watch(ctx, driver.ReleaseChannel("k"), func(string) {})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Nil(t, stop)
}
