package rueidis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/misuse"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// The subtests of TestMisuseRueidis are rows of the table "Bad input and
// the errors it gets" of docs/errors.md (TestReadmeBadInputTable, in core,
// checks that each one named there exists).

// forcedSingle builds a node, named addr, over a client of the one server
// at addr, made from ClientOption with ForceSingleClient (as fxmodule
// makes them): rueidis then returns a client even when the server does
// not answer, along with the error of its first connection, which
// forcedSingle leaves to the node's calls.
func forcedSingle(addr string) (core.Node, func() error, error) {
	o := qlrueidis.ClientOption(addr)
	o.ForceSingleClient = true
	o.Dialer.Timeout = misuse.NodeTimeout // how long NewClient waits for a silent server
	c, err := rueidis.NewClient(o)
	if c == nil {
		return nil, nil, fmt.Errorf("with ForceSingleClient, rueidis makes a client whatever the server does: %w", err)
	}
	closeClient := func() error { c.Close(); return nil }
	n, err := qlrueidis.New(c, qlrueidis.WithName(addr))
	return n, closeClient, err
}

func TestMisuseRueidis(t *testing.T) {
	// The cluster rows share one cluster, started by the first of them.
	sharedCluster := sync.OnceValues(func() (*redistest.Cluster, error) {
		c, err := redistest.StartCluster(context.Background(), 3)
		if err == nil {
			t.Cleanup(func() { assert.NoError(t, c.Close()) })
		}
		return c, err
	})

	t.Run("nil_client", func(t *testing.T) {
		t.Parallel()
		_, err := qlrueidis.New(nil)
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: rueidis: client is nil")
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
		c, err := sharedCluster()
		require.NoError(t, err)
		// rueidis finds the cluster behind each address, so the three
		// nodes, made by single as a user would, are one cluster, named
		// alike.
		_, err = core.New(misuse.Nodes(t, single, c.Addrs()...))
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, `quorumlock: invalid argument: nodes 0 and 1 are both "cluster:127.0.0.1:`)
		require.ErrorContains(t, err, `": one server counted twice breaks the quorum`)
	})
	t.Run("closed_client", func(t *testing.T) {
		t.Parallel()
		_, c := startServer(t)
		n, err := qlrueidis.New(c)
		require.NoError(t, err)
		c.Close()
		_, err = misuse.TryAcquire(t, []core.Node{n}, "k")
		misuse.RequireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 1 nodes ok, 0 refused, 1 failed`)
		misuse.RequireMisuse(t, err, rueidis.ErrClosing, "rueidis client is closing or unable to connect redis")
	})
	t.Run("unreachable_address", func(t *testing.T) {
		t.Parallel()
		misuse.RequireUnreachable(t, misuse.Nodes(t, forcedSingle, redistest.DeadAddr(t), redistest.DeadAddr(t), redistest.DeadAddr(t)))
	})
	t.Run("silent_server", func(t *testing.T) {
		t.Parallel()
		misuse.RequireSilent(t, misuse.Nodes(t, forcedSingle, redistest.SilentAddr(t), redistest.SilentAddr(t), redistest.SilentAddr(t)))
	})
	t.Run("cluster_member_as_master", func(t *testing.T) {
		t.Parallel()
		redistest.RequireServer(t)
		c, err := sharedCluster()
		require.NoError(t, err)
		misuse.RequireClusterMember(t, c, forcedSingle)
	})
}
