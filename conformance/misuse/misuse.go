// Package misuse holds the checks that the driver backends' TestMisuse
// functions share: rows of the table "Bad input and the errors it gets" of
// docs/errors.md that every driver meets alike (a server that is down, one
// that never answers, a Redis Cluster member given as an independent
// master), each run over the nodes of the driver under test.
package misuse

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// NodeTimeout is the node timeout of the Lockers of these checks.
const NodeTimeout = 200 * time.Millisecond

// Nodes returns a node made by factory for each address; each node's
// client is closed at the end of the test.
func Nodes(t *testing.T, factory redistest.NodeFactory, addrs ...string) []core.Node {
	t.Helper()
	nodes := make([]core.Node, len(addrs))
	for i, a := range addrs {
		n, closeClient, err := factory(a)
		if closeClient != nil {
			t.Cleanup(func() { _ = closeClient() })
		}
		require.NoError(t, err)
		nodes[i] = n
	}
	return nodes
}

// TryAcquire makes one round for key over nodes, with NodeTimeout, and
// returns how long it took and its error. It fails the test if the round
// takes more than ten seconds or returns a lock.
func TryAcquire(t *testing.T, nodes []core.Node, key string) (time.Duration, error) {
	t.Helper()
	l, err := core.New(nodes, core.WithNodeTimeout(NodeTimeout))
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

// RequireMisuse checks that err matches target and contains msg.
func RequireMisuse(t *testing.T, err, target error, msg string) {
	t.Helper()
	require.ErrorIs(t, err, target)
	require.ErrorContains(t, err, msg)
}

// threeFailed is the error message of a round for "k" in which none of
// three nodes answered.
const threeFailed = `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 3 nodes ok, 0 refused, 3 failed`

// RequireUnreachable is the row unreachable_address: a round over nodes
// (three, of addresses where nothing listens: redistest.DeadAddr) fails
// at once with ErrUnavailable and the refused connections.
func RequireUnreachable(t *testing.T, nodes []core.Node) {
	t.Helper()
	elapsed, err := TryAcquire(t, nodes, "k")
	RequireMisuse(t, err, core.ErrUnavailable, threeFailed)
	require.ErrorContains(t, err, "connect: connection refused")
	assert.Less(t, elapsed, 2*NodeTimeout, "a refused connection fails at once")
}

// RequireSilent is the row silent_server: a round over nodes (three, of
// servers that never answer: redistest.SilentAddr) fails with
// ErrUnavailable, each node at the node timeout, and the round and its
// clean-up are each bounded by it.
func RequireSilent(t *testing.T, nodes []core.Node) {
	t.Helper()
	elapsed, err := TryAcquire(t, nodes, "k")
	RequireMisuse(t, err, core.ErrUnavailable, threeFailed)
	requireNodeTimeouts(t, err)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "a node's timeout is not the caller's deadline")
	assert.GreaterOrEqual(t, elapsed, NodeTimeout)
	assert.Less(t, elapsed, 2*NodeTimeout+300*time.Millisecond, "the round and its clean-up are each bounded by the node timeout")
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

// RequireClusterMember is the row cluster_member_as_master: masters of c,
// a 3-master cluster, each given to factory as if it were an independent
// master.
func RequireClusterMember(t *testing.T, c *redistest.Cluster, factory redistest.NodeFactory) {
	t.Helper()
	// One master: keys of the other masters' slots fail with the
	// redirection it answers.
	const key = "orders:42"
	other := (c.MasterOfSlot(driver.HashSlot(key)) + 1) % 3
	_, err := TryAcquire(t, Nodes(t, factory, c.Addrs()[other]), key)
	RequireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "orders:42": too many nodes unavailable for a quorum: 0 of 1 nodes ok, 0 refused, 1 failed`)
	require.ErrorContains(t, err, "failed in ")
	require.ErrorContains(t, err, ": MOVED 11414 127.0.0.1:")

	// Every master, each given as an independent one: with three nodes
	// or more, the restart guard's acquisition script (on by default)
	// touches the lock key and the node's birth key, of two slots, and
	// every master refuses it, whoever serves the key.
	_, err = TryAcquire(t, Nodes(t, factory, c.Addrs()...), key)
	RequireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "orders:42": too many nodes unavailable for a quorum: 0 of 3 nodes ok, 0 refused, 3 failed`)
	require.ErrorContains(t, err, ": CROSSSLOT Keys in request don't hash to the same slot")
	require.ErrorIs(t, err, core.ErrInvalidArgument, "the node error says what is wrong")
	require.ErrorContains(t, err, "this server is a Redis Cluster member, not an independent master")
}

// RequireExplains checks a backend's explain for a node over a client of
// one server: nil and an error other than a Redis Cluster reply pass
// through unchanged, and moved, a MOVED reply, comes back matching
// core.ErrInvalidArgument and moved, its message moved's followed by what
// is wrong and advice.
func RequireExplains(t *testing.T, explain func(error) error, moved error, advice string) {
	t.Helper()
	assert.NoError(t, explain(nil))
	err := explain(moved)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.ErrorIs(t, err, moved)
	assert.Contains(t, err.Error(), moved.Error()+": this server is a Redis Cluster member, not an independent master")
	assert.Contains(t, err.Error(), advice)
	other := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	assert.Equal(t, other, explain(other))
}
