package redigo_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// The subtests of TestMisuseRedigo are rows of the README's table "Bad
// input and the errors it gets" (TestReadmeBadInputTable, in core, checks
// that each one named there exists).

// misuseNodeTimeout is the node timeout of the Lockers of these tests.
const misuseNodeTimeout = 200 * time.Millisecond

// pool returns a pool of addr made by redigo.NewPool, closed at the end of
// the test.
func pool(t *testing.T, addr string) *redis.Pool {
	t.Helper()
	p := redigo.NewPool(addr)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// nodesOf returns a node over a pool of each address, named after it.
func nodesOf(t *testing.T, addrs ...string) []core.Node {
	t.Helper()
	nodes := make([]core.Node, len(addrs))
	for i, a := range addrs {
		n, err := redigo.New(pool(t, a), redigo.WithName(a))
		require.NoError(t, err)
		nodes[i] = n
	}
	return nodes
}

// tryAcquire makes one round for key over nodes, with misuseNodeTimeout,
// and returns how long it took and its error. It fails the test if the
// round takes more than ten seconds.
func tryAcquire(t *testing.T, nodes []core.Node, key string) (time.Duration, error) {
	t.Helper()
	l, err := core.New(nodes, core.WithNodeTimeout(misuseNodeTimeout))
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

func TestMisuseRedigo(t *testing.T) {
	t.Run("nil_pool", func(t *testing.T) {
		t.Parallel()
		_, err := redigo.New(nil)
		requireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: redigo: pool is nil")
		_, err = redigo.New((*redis.Pool)(nil))
		requireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: redigo: pool is nil")
	})
	t.Run("pool_without_dial", func(t *testing.T) {
		t.Parallel()
		_, err := redigo.New(&redis.Pool{}, redigo.WithName("a"))
		requireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: redigo: pool a has neither Dial nor DialContext")
	})
	t.Run("pool_with_plain_dial", func(t *testing.T) {
		t.Parallel()
		p := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", "127.0.0.1:1") }}
		_, err := redigo.New(p, redigo.WithName("a"))
		requireMisuse(t, err, core.ErrInvalidArgument,
			"quorumlock: invalid argument: redigo: pool a dials with Dial, which ignores contexts, so a server that accepts no connection would stall every round")
	})
	t.Run("same_server_unnamed", func(t *testing.T) {
		t.Parallel()
		// A pool cannot tell the address it dials, so two unnamed nodes
		// over one server look like two servers: nothing can refuse them.
		a, err := redigo.New(pool(t, "10.0.0.1:6379"))
		require.NoError(t, err)
		b, err := redigo.New(pool(t, "10.0.0.1:6379"))
		require.NoError(t, err)
		assert.NotEqual(t, a.String(), b.String())
		// Named after their servers, they are refused.
		_, err = core.New(nodesOf(t, "10.0.0.1:6379", "10.0.0.1:6379"))
		requireMisuse(t, err, core.ErrInvalidArgument,
			`quorumlock: invalid argument: nodes 0 and 1 are both "10.0.0.1:6379": one server counted twice breaks the quorum`)
	})
	t.Run("closed_pool", func(t *testing.T) {
		t.Parallel()
		p := redigo.NewPool("127.0.0.1:1")
		n, err := redigo.New(p, redigo.WithName("a"))
		require.NoError(t, err)
		require.NoError(t, p.Close())
		_, err = tryAcquire(t, []core.Node{n}, "k")
		requireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 1 nodes ok, 0 refused, 1 failed`)
		require.ErrorContains(t, err, "redigo: get on closed pool")
	})
	t.Run("unreachable_address", func(t *testing.T) {
		t.Parallel()
		nodes := nodesOf(t, redistest.DeadAddr(t), redistest.DeadAddr(t), redistest.DeadAddr(t))
		elapsed, err := tryAcquire(t, nodes, "k")
		requireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 3 nodes ok, 0 refused, 3 failed`)
		require.ErrorContains(t, err, "connect: connection refused")
		assert.Less(t, elapsed, 2*misuseNodeTimeout, "a refused connection fails at once")
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

		const key = "orders:42"
		other := (c.MasterOfSlot(core.HashSlot(key)) + 1) % 3
		_, err = tryAcquire(t, nodesOf(t, c.Addrs()[other]), key)
		requireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "orders:42": too many nodes unavailable for a quorum: 0 of 1 nodes ok, 0 refused, 1 failed`)
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
