package valkey_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/conformance/misuse"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// The rows of the table "Bad input and the errors it gets" of
// docs/errors.md that every backend meets, for valkey-go. (Named
// TestValkeyMisuse, not TestMisuse...: core's TestReadmeBadInputTable
// requires every TestMisuse subtest to be named in that table.)

// forcedSingle builds a node, named addr, over a client of the one server
// at addr with ForceSingleClient (as Dial makes them): valkey-go then
// returns a client even when the server does not answer, along with the
// error of its first connection, which it leaves to the node's calls.
func forcedSingle(addr string) (core.Node, func() error, error) {
	o := qlvalkey.ClientOption(addr)
	o.ForceSingleClient = true
	o.Dialer.Timeout = misuse.NodeTimeout // how long NewClient waits for a silent server
	c, err := valkey.NewClient(o)
	if c == nil {
		return nil, nil, fmt.Errorf("with ForceSingleClient, valkey-go makes a client whatever the server does: %w", err)
	}
	n, err := qlvalkey.New(c, qlvalkey.WithName(addr))
	return n, func() error { c.Close(); return nil }, err
}

func TestMisuseValkey(t *testing.T) {
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
		_, err := qlvalkey.New(nil)
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: valkey: client is nil")
		var typed valkey.Client = (*nilClient)(nil)
		_, err = qlvalkey.New(typed)
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: valkey: client is nil")
	})
	t.Run("server_down_at_new_client", func(t *testing.T) {
		t.Parallel()
		dead := redistest.DeadAddr(t)
		c, err := valkey.NewClient(qlvalkey.ClientOption(dead))
		require.Nil(t, c, "no client, so no node")
		require.ErrorContains(t, err, "dial tcp "+dead+": connect: connection refused")
	})
	t.Run("cluster_masters_as_separate_nodes", func(t *testing.T) {
		t.Parallel()
		redistest.RequireServer(t)
		c, err := sharedCluster()
		require.NoError(t, err)
		// valkey-go finds the cluster behind each address, so the three
		// nodes are one cluster, named alike.
		_, err = core.New(misuse.Nodes(t, single, c.Addrs()...))
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, `quorumlock: invalid argument: nodes 0 and 1 are both "cluster:127.0.0.1:`)
	})
	t.Run("closed_client", func(t *testing.T) {
		t.Parallel()
		redistest.RequireServer(t)
		srv := redistest.StartTestServer(t)
		c, err := valkey.NewClient(qlvalkey.ClientOption(srv.Addr()))
		require.NoError(t, err)
		n, err := qlvalkey.New(c)
		require.NoError(t, err)
		c.Close()
		_, err = misuse.TryAcquire(t, []core.Node{n}, "k")
		misuse.RequireMisuse(t, err, core.ErrUnavailable, `quorumlock: acquire "k": too many nodes unavailable for a quorum: 0 of 1 nodes ok, 0 refused, 1 failed`)
		misuse.RequireMisuse(t, err, valkey.ErrClosing, "valkey client is closing or unable to connect valkey")
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

// nilClient is a client type whose nil pointer New must refuse.
type nilClient struct{ valkey.Client }
