package redistest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStopKeepingData: a server stopped with StopKeepingData comes back
// with its keys and their expiry, and without cached scripts; a plain Stop
// (or a Restart of a running server) brings it back empty, even after an
// earlier StopKeepingData.
func TestStopKeepingData(t *testing.T) {
	RequireServer(t)
	t.Parallel()
	ctx := t.Context()
	s, err := StartServer(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	c := plainClient(s.Addr())
	t.Cleanup(func() { _ = c.Close() })

	require.NoError(t, c.Set(ctx, "kept", "v", 0).Err())
	require.NoError(t, c.Set(ctx, "expiring", "w", time.Minute).Err())
	sha, err := c.ScriptLoad(ctx, "return 1").Result()
	require.NoError(t, err)

	require.NoError(t, s.StopKeepingData(ctx))
	require.False(t, s.Running())
	require.NoError(t, s.Restart(ctx))
	assert.Equal(t, "v", c.Get(ctx, "kept").Val())
	assert.Equal(t, "w", c.Get(ctx, "expiring").Val())
	ttl := c.PTTL(ctx, "expiring").Val()
	assert.True(t, ttl > 50*time.Second && ttl <= time.Minute, "expiry kept: %v", ttl)
	exists, err := c.ScriptExists(ctx, sha).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, exists, "scripts are not kept")

	// A plain stop loses the keys, though a snapshot was written before.
	require.NoError(t, s.Stop())
	require.NoError(t, s.Restart(ctx))
	assert.ErrorIs(t, c.Get(ctx, "kept").Err(), redis.Nil, "a plain Stop comes back empty")

	// So does a restart of a running server, and a kill.
	require.NoError(t, c.Set(ctx, "kept", "v", 0).Err())
	require.NoError(t, s.StopKeepingData(ctx))
	require.NoError(t, s.Restart(ctx))
	require.Equal(t, "v", c.Get(ctx, "kept").Val())
	require.NoError(t, s.Restart(ctx))
	assert.ErrorIs(t, c.Get(ctx, "kept").Err(), redis.Nil, "a restart of a running server comes back empty")

	require.NoError(t, s.Pause())
	assert.Error(t, s.StopKeepingData(ctx), "a paused server cannot save")
	require.NoError(t, s.Resume())
}
