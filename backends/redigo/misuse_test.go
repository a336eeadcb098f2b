package redigo_test

import (
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/conformance/misuse"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// The subtests of TestMisuseRedigo are rows of the table "Bad input and the
// errors it gets" of docs/errors.md (TestReadmeBadInputTable, in core,
// checks that each one named there exists). Their nodes are made by
// factory, of conformance_test.go, as a user would make them: over a pool
// of redigo.NewPool, named after its server.

func TestMisuseRedigo(t *testing.T) {
	t.Run("nil_pool", func(t *testing.T) {
		t.Parallel()
		_, err := redigo.New(nil)
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: redigo: pool is nil")
		_, err = redigo.New((*redis.Pool)(nil))
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: redigo: pool is nil")
	})
	t.Run("pool_without_dial", func(t *testing.T) {
		t.Parallel()
		_, err := redigo.New(&redis.Pool{}, redigo.WithName("a"))
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: redigo: pool a has neither Dial nor DialContext")
	})
	t.Run("pool_with_plain_dial", func(t *testing.T) {
		t.Parallel()
		p := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", "127.0.0.1:1") }}
		_, err := redigo.New(p, redigo.WithName("a"))
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			"quorumlock: invalid argument: redigo: pool a dials with Dial, which ignores contexts, so a server that accepts no connection would stall every round")
	})
	t.Run("same_server_unnamed", func(t *testing.T) {
		t.Parallel()
		// Unnamed nodes over NewPool's pools are named after the address
		// they dial, so two over one server are refused.
		pa, pb := redigo.NewPool("10.0.0.1:6379"), redigo.NewPool("10.0.0.1:6379")
		defer pa.Close()
		defer pb.Close()
		a, err := redigo.New(pa)
		require.NoError(t, err)
		b, err := redigo.New(pb)
		require.NoError(t, err)
		assert.Equal(t, a.String(), b.String())
		_, err = core.New([]core.Node{a, b})
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		// Named after their servers, they are refused alike.
		_, err = core.New(misuse.Nodes(t, factory, "10.0.0.1:6379", "10.0.0.1:6379"))
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			`quorumlock: invalid argument: nodes 0 and 1 are both "10.0.0.1:6379": one server counted twice breaks the quorum`)
	})
	t.Run("closed_pool", func(t *testing.T) {
		t.Parallel()
		n, closePool, err := factory("127.0.0.1:1")
		require.NoError(t, err)
		require.NoError(t, closePool())
		_, err = misuse.TryAcquire(t, []core.Node{n}, "k")
		misuse.RequireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 1 nodes ok, 0 refused, 1 failed`)
		require.ErrorContains(t, err, "redigo: get on closed pool")
	})
	t.Run("unreachable_address", func(t *testing.T) {
		t.Parallel()
		misuse.RequireUnreachable(t, misuse.Nodes(t, factory, redistest.DeadAddr(t), redistest.DeadAddr(t), redistest.DeadAddr(t)))
	})
	t.Run("silent_server", func(t *testing.T) {
		t.Parallel()
		misuse.RequireSilent(t, misuse.Nodes(t, factory, redistest.SilentAddr(t), redistest.SilentAddr(t), redistest.SilentAddr(t)))
	})
	t.Run("cluster_member_as_master", func(t *testing.T) {
		t.Parallel()
		redistest.RequireServer(t)
		c, err := redistest.StartCluster(t.Context(), 3)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, c.Close()) })
		misuse.RequireClusterMember(t, c, factory)
	})
}
