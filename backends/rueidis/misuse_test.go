package rueidis_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// The subtests of TestMisuseRueidis are rows of the README's table "Bad
// input and the errors it gets" (TestReadmeBadInputTable, in core, checks
// that each one named there exists).

// misuseNodeTimeout is the node timeout of the Lockers of these tests.
const misuseNodeTimeout = 200 * time.Millisecond

// singleClient returns a client of the one server at addr, made from
// ClientOption with ForceSingleClient (as fxmodule makes them): rueidis
// then returns a client even when the server does not answer, along with
// the error of its first connection. It is closed at the end of the test.
func singleClient(t *testing.T, addr string) (rueidis.Client, error) {
	t.Helper()
	o := qlrueidis.ClientOption(addr)
	o.ForceSingleClient = true
	o.Dialer.Timeout = misuseNodeTimeout // how long NewClient waits for a silent server
	c, err := rueidis.NewClient(o)
	require.NotNil(t, c, "with ForceSingleClient, rueidis makes a client whatever the server does: %v", err)
	t.Cleanup(c.Close)
	return c, err
}

// nodesOf returns a node over a single-server client of each address.
func nodesOf(t *testing.T, addrs ...string) []core.Node {
	t.Helper()
	nodes := make([]core.Node, len(addrs))
	for i, a := range addrs {
		c, _ := singleClient(t, a)
		n, err := qlrueidis.New(c, qlrueidis.WithName(a))
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

func TestMisuseRueidis(t *testing.T) {
	// The cluster rows share one cluster, started by the first of them.
	cluster := sync.OnceValues(func() (*redistest.Cluster, error) {
		c, err := redistest.StartCluster(context.Background(), 3)
		if err == nil {
			t.Cleanup(func() { assert.NoError(t, c.Close()) })
		}
		return c, err
	})

	t.Run("nil_client", func(t *testing.T) {
		t.Parallel()
		_, err := qlrueidis.New(nil)
		requireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: rueidis: client is nil")
	})
	t.Run("server_down_at_new_client", func(t *testing.T) {
		t.Parallel()
		dead := redistest.DeadAddr(t)
		c, err := rueidis.NewClient(qlrueidis.ClientOption(dead))
		require.Nil(t, c, "no client, so no node")
		require.ErrorContains(t, err, "dial tcp "+dead+": connect: connection refused")
	})
	t.Run("cluster_masters_as_separate_nodes", func(t *testing.T) {
		t.Parallel()
		redistest.RequireServer(t)
		c, err := cluster()
		require.NoError(t, err)
		// rueidis finds the cluster behind each address, so the three
		// nodes are one cluster, named alike.
		var nodes []core.Node
		for _, a := range c.Addrs() {
			client, err := rueidis.NewClient(qlrueidis.ClientOption(a))
			require.NoError(t, err)
			t.Cleanup(client.Close)
			n, err := qlrueidis.New(client)
			require.NoError(t, err)
			nodes = append(nodes, n)
		}
		_, err = core.New(nodes)
		requireMisuse(t, err, core.ErrInvalidArgument, `quorumlock: invalid argument: nodes 0 and 1 are both "cluster:127.0.0.1:`)
		require.ErrorContains(t, err, `": one server counted twice breaks the quorum`)
	})
	t.Run("closed_client", func(t *testing.T) {
		t.Parallel()
		redistest.RequireServer(t)
		srv, err := redistest.StartServer(t.Context())
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, srv.Close()) })
		c, err := rueidis.NewClient(qlrueidis.ClientOption(srv.Addr()))
		require.NoError(t, err)
		n, err := qlrueidis.New(c)
		require.NoError(t, err)
		c.Close()
		_, err = tryAcquire(t, []core.Node{n}, "k")
		requireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 1 nodes ok, 0 refused, 1 failed`)
		requireMisuse(t, err, rueidis.ErrClosing, "rueidis client is closing or unable to connect redis")
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
		c, err := cluster()
		require.NoError(t, err)
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
