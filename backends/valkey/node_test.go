package valkey_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// New names a node after its client's server, skips nil options and keeps
// the default name for WithName(""); the client stays the caller's.
func TestNewNamesAndOptions(t *testing.T) {
	t.Parallel()
	srv := redistest.StartTestServer(t)
	client, err := valkey.NewClient(qlvalkey.ClientOption(srv.Addr()))
	require.NoError(t, err)
	defer client.Close()
	node, err := qlvalkey.New(client, nil, qlvalkey.WithName(""))
	require.NoError(t, err)
	assert.Equal(t, srv.Addr(), node.String())
	assert.False(t, node.Sharded())
	require.NoError(t, node.Close())
	assert.NoError(t, client.Do(redistest.TestContext(t), client.B().Ping().Build()).Error(), "Close leaves the caller's client open")

	named, err := qlvalkey.New(client, qlvalkey.WithName("a"), qlvalkey.WithName("b"))
	require.NoError(t, err)
	assert.Equal(t, "b", named.String(), "the later option wins")
}

// A client that can write a lock to another server than its primary is
// not one Redlock node: New refuses it. (Redirects, the other such client,
// need Valkey 8's CLIENT CAPA redirect, which redis-server 7 refuses.)
func TestNewRefusesReplicasAndRedirects(t *testing.T) {
	t.Parallel()
	primary, replica := redistest.StartTestServer(t).Addr(), redistest.StartTestServer(t).Addr()
	for name, o := range map[string]func(*valkey.ClientOption){
		"replicas": func(o *valkey.ClientOption) {
			o.Standalone.ReplicaAddress = []string{replica}
			o.SendToReplicas = func(valkey.Completed) bool { return false }
		},
	} {
		t.Run(name, func(t *testing.T) {
			opt := qlvalkey.ClientOption(primary)
			o(&opt)
			client, err := valkey.NewClient(opt)
			require.NoError(t, err)
			defer client.Close()
			_, err = qlvalkey.New(client)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			assert.ErrorContains(t, err, "was made with Standalone.ReplicaAddress or Standalone.EnableRedirect")
		})
	}
}

// The server forgets a channel once the node's last watch of it has
// stopped, and not before; a stop called twice counts once.
func TestWatchUnsubscribes(t *testing.T) {
	t.Parallel()
	srv := redistest.StartTestServer(t)
	client, err := valkey.NewClient(qlvalkey.ClientOption(srv.Addr()))
	require.NoError(t, err)
	t.Cleanup(client.Close)
	n, err := qlvalkey.New(client)
	require.NoError(t, err)
	ch := driver.ReleaseChannel("k")
	subscribers := func() int64 {
		v, err := client.Do(redistest.TestContext(t), client.B().PubsubNumsub().Channel(ch).Build()).AsIntMap()
		require.NoError(t, err)
		return v[ch]
	}
	stopA, err := n.Watch(redistest.TestContext(t), ch, func(string) {})
	require.NoError(t, err)
	stopB, err := n.Watch(redistest.TestContext(t), ch, func(string) {})
	require.NoError(t, err)
	assert.Equal(t, int64(1), subscribers(), "both watches share the client's connection")
	stopA()
	assert.Equal(t, int64(1), subscribers(), "another watch of the channel remains")
	stopA()
	assert.Equal(t, int64(1), subscribers(), "a second stop of one watch changes nothing")
	stopB()
	assert.Equal(t, int64(0), subscribers(), "the last stop unsubscribes")
}
