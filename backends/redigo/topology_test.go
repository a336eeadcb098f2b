package redigo_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// The subtests of TestTopologyRedigo are rows of the table of client types
// of docs/topologies.md (TestReadmeTopologyTable, in core, checks that each
// one is named there, and that each test named there exists).

func TestTopologyRedigo(t *testing.T) {
	t.Run("pool_dialling_several_servers", func(t *testing.T) {
		t.Parallel()
		// A pool's Dial is a function: nothing can tell which servers it
		// dials. One that picks among several (here, the server the test
		// names; a Sentinel helper's dialler dials the master of the
		// moment, a round robin the next server) is accepted, and is not
		// one Redlock node: a new connection may reach another server,
		// and one lock key is taken twice.
		redistest.RequireServer(t)
		ctx := t.Context()
		servers := make([]*redistest.Server, 2)
		for i := range servers {
			s, err := redistest.StartServer(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, s.Close()) })
			servers[i] = s
		}
		var current atomic.Int64 // the server the pool dials
		pool := &redis.Pool{
			// No idle connection is kept: each operation dials anew.
			DialContext: func(ctx context.Context) (redis.Conn, error) {
				return redis.DialContext(ctx, "tcp", servers[current.Load()].Addr())
			},
		}
		defer pool.Close()
		n, err := redigo.New(pool, redigo.WithName("pool"))
		require.NoError(t, err, "nothing can tell")

		lockers := make([]*core.Locker, 2)
		for i := range lockers {
			l, err := core.New([]core.Node{n})
			require.NoError(t, err)
			defer l.Close()
			lockers[i] = l
		}
		const key = "orders:42"
		first, err := lockers[0].TryAcquire(ctx, key)
		require.NoError(t, err)
		current.Store(1) // a failover, as the dialler sees it
		second, err := lockers[1].TryAcquire(ctx, key)
		require.NoError(t, err, "the second SET went to the other server")
		assert.Positive(t, first.Validity(), "two holders")
		assert.Positive(t, second.Validity(), "two holders")
		for _, s := range servers {
			c, err := redis.DialContext(ctx, "tcp", s.Addr())
			require.NoError(t, err)
			exists, err := redis.Int(redis.DoContext(c, ctx, "EXISTS", key))
			require.NoError(t, c.Close())
			require.NoError(t, err)
			assert.Equal(t, 1, exists, "the key is on %s", s.Addr())
		}
	})
}
