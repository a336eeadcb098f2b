package redistest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
)

// StartTestServer starts a redis-server for t (RequireServer first), and
// closes it when t ends.
func StartTestServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	RequireServer(t)
	srv, err := StartServer(t.Context(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	return srv
}

// TestContext returns a context bounded to ten seconds, for one step of
// t; it is cancelled when t ends.
func TestContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// AdminClient returns a go-redis client of t's own to the server at addr,
// without retries, closed when t ends: for setting up and inspecting a
// server behind the backend under test.
func AdminClient(t testing.TB, addr string) *redis.Client {
	c := plainClient(addr)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// RequireHeldEverywhere acquires fresh keys through locker until one is
// held on every server of addrs (a server just back may miss a round or
// two), releasing each, and fails t after twenty seconds.
func RequireHeldEverywhere(t *testing.T, locker *core.Locker, addrs []string) {
	t.Helper()
	i := 0
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		i++
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		key := t.Name() + ":" + strconv.Itoa(i)
		lock, err := locker.Acquire(ctx, key)
		require.NoError(c, err)
		defer func() { assert.NoError(c, lock.Release(ctx)) }()
		for _, a := range addrs {
			admin := plainClient(a)
			assert.Equal(c, int64(1), admin.Exists(ctx, key).Val(), "held on %s", a)
			_ = admin.Close()
		}
	}, 20*time.Second, 50*time.Millisecond)
}
