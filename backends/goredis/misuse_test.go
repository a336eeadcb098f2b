package goredis_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance/misuse"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// The subtests of TestMisuseGoRedis are rows of the table "Bad input and
// the errors it gets" of docs/errors.md (TestReadmeBadInputTable, in core,
// checks that each one named there exists). Their nodes are made by single,
// of conformance_test.go, as a user would make them.

func TestMisuseGoRedis(t *testing.T) {
	t.Run("nil_client", func(t *testing.T) {
		t.Parallel()
		_, err := goredis.New(nil)
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: goredis: client is nil")
		_, err = goredis.New((*redis.Client)(nil))
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: goredis: client is nil")
	})
	t.Run("unbounded_client", func(t *testing.T) {
		t.Parallel()
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		defer c.Close()
		_, err := goredis.New(c)
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			"quorumlock: invalid argument: goredis: client 127.0.0.1:1 has ContextTimeoutEnabled false, so contexts cannot bound its calls")
	})
	t.Run("same_address_twice", func(t *testing.T) {
		t.Parallel()
		_, err := core.New(misuse.Nodes(t, single, "10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.1:6379"))
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			`quorumlock: invalid argument: nodes 0 and 2 are both "10.0.0.1:6379": one server counted twice breaks the quorum`)
	})
	t.Run("closed_client", func(t *testing.T) {
		t.Parallel()
		n, closeClient, err := single("127.0.0.1:1")
		require.NoError(t, err)
		require.NoError(t, closeClient())
		_, err = misuse.TryAcquire(t, []core.Node{n}, "k")
		misuse.RequireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 1 nodes ok, 0 refused, 1 failed`)
		require.ErrorIs(t, err, redis.ErrClosed)
		require.ErrorContains(t, err, "redis: client is closed")
	})
	t.Run("unreachable_address", func(t *testing.T) {
		t.Parallel()
		nodes := misuse.Nodes(t, single, redistest.DeadAddr(t), redistest.DeadAddr(t), redistest.DeadAddr(t))
		misuse.RequireUnreachable(t, nodes)

		// Acquire makes WithTries rounds before it gives up.
		l, err := core.New(nodes, core.WithNodeTimeout(misuse.NodeTimeout), core.WithTries(3),
			core.WithRetryDelay(strategies.JitterDelay(10*time.Millisecond, 10*time.Millisecond)))
		require.NoError(t, err)
		defer l.Close()
		start := time.Now()
		_, err = l.Acquire(t.Context(), "k")
		misuse.RequireMisuse(t, err, core.ErrUnavailable, "3 failed, quorum 2, after 3 tries")
		assert.Less(t, time.Since(start), 3*2*misuse.NodeTimeout+20*time.Millisecond)
	})
	t.Run("silent_server", func(t *testing.T) {
		t.Parallel()
		misuse.RequireSilent(t, misuse.Nodes(t, single, redistest.SilentAddr(t), redistest.SilentAddr(t), redistest.SilentAddr(t)))
	})
	t.Run("cluster_member_as_master", func(t *testing.T) {
		t.Parallel()
		redistest.RequireServer(t)
		c, err := redistest.StartCluster(t.Context(), 3)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, c.Close()) })
		misuse.RequireClusterMember(t, c, single)
	})
}
