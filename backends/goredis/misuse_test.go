package goredis_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// The subtests of TestMisuseGoRedis are rows of the README's table "Bad
// input and the errors it gets" (TestReadmeBadInputTable, in core, checks
// that each one named there exists).

// misuseNodeTimeout is the node timeout of the Lockers of these tests.
const misuseNodeTimeout = 200 * time.Millisecond

// client returns a go-redis client of addr, as a user would make it,
// closed at the end of the test.
func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(goredis.ClientOptions(addr))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// nodesOf returns a node over a client of each address.
func nodesOf(t *testing.T, addrs ...string) []core.Node {
	t.Helper()
	nodes := make([]core.Node, len(addrs))
	for i, a := range addrs {
		n, err := goredis.New(client(t, a))
		require.NoError(t, err)
		nodes[i] = n
	}
	return nodes
}

// tryAcquire makes one round for key over nodes, with misuseNodeTimeout,
// and returns how long it took and its error. It fails the test if the
// round panics or takes more than ten seconds.
func tryAcquire(t *testing.T, nodes []core.Node, key string, opts ...core.Option) (time.Duration, error) {
	t.Helper()
	l, err := core.New(nodes, append([]core.Option{core.WithNodeTimeout(misuseNodeTimeout)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	lock, err := l.TryAcquire(ctx, key)
	elapsed := time.Since(start)
	require.Nil(t, lock)
	require.NoError(t, ctx.Err(), "the round outlasted its bound")
	return elapsed, err
}

func requireMisuse(t *testing.T, err error, target error, msg string) {
	t.Helper()
	require.ErrorIs(t, err, target)
	require.ErrorContains(t, err, msg)
}

// requireNodeTimeouts checks that every node of err's round failed at the
// node timeout: with core.ErrNodeTimeout ("no answer within the node
// timeout of 200ms"), or with the driver's own network timeout when the
// driver's socket deadline, set from the call's context, fired before the
// context's own timer, which a loaded machine makes likely: core then
// reports the driver's error as it is.
func requireNodeTimeouts(t *testing.T, err error) {
	t.Helper()
	var qe *core.QuorumError
	require.ErrorAs(t, err, &qe)
	for _, n := range qe.Nodes {
		require.Equal(t, core.OutcomeFailed, n.Outcome, "node %d", n.Index)
		if errors.Is(n.Err, core.ErrNodeTimeout) {
			require.ErrorContains(t, n.Err, "no answer within the node timeout of 200ms")
			continue
		}
		var ne net.Error
		require.True(t, errors.As(n.Err, &ne) && ne.Timeout(), "node %d failed with %v, not a timeout", n.Index, n.Err)
	}
}

func TestMisuseGoRedis(t *testing.T) {
	t.Run("nil_client", func(t *testing.T) {
		t.Parallel()
		_, err := goredis.New(nil)
		requireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: goredis: client is nil")
		_, err = goredis.New((*redis.Client)(nil))
		requireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: goredis: client is nil")
	})
	t.Run("unbounded_client", func(t *testing.T) {
		t.Parallel()
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		defer c.Close()
		_, err := goredis.New(c)
		requireMisuse(t, err, core.ErrInvalidArgument,
			"quorumlock: invalid argument: goredis: client 127.0.0.1:1 has ContextTimeoutEnabled false, so contexts cannot bound its calls")
	})
	t.Run("same_address_twice", func(t *testing.T) {
		t.Parallel()
		_, err := core.New(nodesOf(t, "10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.1:6379"))
		requireMisuse(t, err, core.ErrInvalidArgument,
			`quorumlock: invalid argument: nodes 0 and 2 are both "10.0.0.1:6379": one server counted twice breaks the quorum`)
	})
	t.Run("closed_client", func(t *testing.T) {
		t.Parallel()
		c := redis.NewClient(goredis.ClientOptions("127.0.0.1:1"))
		n, err := goredis.New(c)
		require.NoError(t, err)
		require.NoError(t, c.Close())
		_, err = tryAcquire(t, []core.Node{n}, "k")
		requireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 1 nodes ok, 0 refused, 1 failed`)
		require.ErrorIs(t, err, redis.ErrClosed)
		require.ErrorContains(t, err, "redis: client is closed")
	})
	t.Run("unreachable_address", func(t *testing.T) {
		t.Parallel()
		nodes := nodesOf(t, redistest.DeadAddr(t), redistest.DeadAddr(t), redistest.DeadAddr(t))
		elapsed, err := tryAcquire(t, nodes, "k")
		requireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 3 nodes ok, 0 refused, 3 failed`)
		require.ErrorContains(t, err, "connect: connection refused")
		assert.Less(t, elapsed, 2*misuseNodeTimeout, "a refused connection fails at once")

		// Acquire makes WithTries rounds before it gives up.
		l, err := core.New(nodes, core.WithNodeTimeout(misuseNodeTimeout), core.WithTries(3),
			core.WithRetryDelay(core.JitterDelay(10*time.Millisecond, 10*time.Millisecond)))
		require.NoError(t, err)
		defer l.Close()
		start := time.Now()
		_, err = l.Acquire(t.Context(), "k")
		requireMisuse(t, err, core.ErrUnavailable, "3 failed, quorum 2, after 3 tries")
		assert.Less(t, time.Since(start), 3*2*misuseNodeTimeout+20*time.Millisecond)
	})
	t.Run("silent_server", func(t *testing.T) {
		t.Parallel()
		nodes := nodesOf(t, redistest.SilentAddr(t), redistest.SilentAddr(t), redistest.SilentAddr(t))
		elapsed, err := tryAcquire(t, nodes, "k")
		requireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 3 nodes ok, 0 refused, 3 failed`)
		requireNodeTimeouts(t, err)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "a node's timeout is not the caller's deadline")
		assert.GreaterOrEqual(t, elapsed, misuseNodeTimeout)
		assert.Less(t, elapsed, 2*misuseNodeTimeout+300*time.Millisecond, "the round and its clean-up are each bounded by the node timeout")
	})
	t.Run("cluster_member_as_master", func(t *testing.T) {
		t.Parallel()
		redistest.RequireServer(t)
		c, err := redistest.StartCluster(t.Context(), 3)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, c.Close()) })

		// One master, given as if it were an independent one: keys of the
		// other masters' slots fail with the redirection it answers.
		const key = "orders:42"
		other := (c.MasterOfSlot(core.HashSlot(key)) + 1) % 3
		_, err = tryAcquire(t, nodesOf(t, c.Addrs()[other]), key)
		requireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "orders:42": too many nodes unavailable for a quorum: 0 of 1 nodes ok, 0 refused, 1 failed`)
		require.ErrorContains(t, err, "failed in ")
		require.ErrorContains(t, err, ": MOVED 11414 127.0.0.1:")

		// Every master, each given as an independent one: with three nodes
		// or more, the restart guard's acquisition script (on by default)
		// touches the lock key and the node's birth key, of two slots, and
		// every master refuses it, whoever serves the key.
		_, err = tryAcquire(t, nodesOf(t, c.Addrs()...), key)
		requireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "orders:42": too many nodes unavailable for a quorum: 0 of 3 nodes ok, 0 refused, 3 failed`)
		require.ErrorContains(t, err, ": CROSSSLOT Keys in request don't hash to the same slot")
		require.ErrorIs(t, err, core.ErrInvalidArgument, "the node error says what is wrong")
		require.ErrorContains(t, err, "this server is a Redis Cluster member, not an independent master")
	})
}
