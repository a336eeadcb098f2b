package rueidis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

func TestNewRefusesNil(t *testing.T) {
	_, err := qlrueidis.New(nil)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "client is nil")

	var typedNil *fakeClient
	_, err = qlrueidis.New(typedNil)
	require.ErrorIs(t, err, core.ErrInvalidArgument, "a typed nil client is refused, not dereferenced")
}

// fakeClient only stands in for a typed nil; it is never called.
type fakeClient struct{ rueidis.Client }

func TestClientOption(t *testing.T) {
	o := qlrueidis.ClientOption("10.0.0.1:6379", "10.0.0.2:6379")
	assert.Equal(t, []string{"10.0.0.1:6379", "10.0.0.2:6379"}, o.InitAddress)
	assert.True(t, o.DisableCache, "no CLIENT TRACKING")
	assert.True(t, o.DisableRetry)
	assert.True(t, o.AlwaysPipelining, "cancellation is honoured only through the pipelining queue")
	assert.Equal(t, -1, o.PipelineMultiplex, "one connection per server keeps a release behind its SET")
	assert.Equal(t, 5*time.Second, o.Dialer.Timeout)
	assert.Equal(t, 2*time.Second, o.ConnWriteTimeout, "bounds a cluster Receive's handshake, which ignores its context")
}

func TestNamesAndClosingOwnedClient(t *testing.T) {
	redistest.RequireServer(t)
	srv, err := redistest.StartServer(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })

	client, err := rueidis.NewClient(qlrueidis.ClientOption(srv.Addr()))
	require.NoError(t, err)
	n, err := qlrueidis.New(client)
	require.NoError(t, err)
	assert.Equal(t, srv.Addr(), n.String(), "a server's name, as backends/goredis gives it")
	named, err := qlrueidis.New(client, qlrueidis.WithName("eu-1"))
	require.NoError(t, err)
	assert.Equal(t, "eu-1", named.String())

	// Without WithCloseClient(true) the node leaves the client alone.
	require.NoError(t, n.Close())
	ok, err := n.SetNX(t.Context(), "k", "v", time.Second)
	require.NoError(t, err, "Close of a node that does not own its client changes nothing")
	assert.True(t, ok)

	// With it, Close closes the client and the node refuses calls.
	owner, err := qlrueidis.New(client, qlrueidis.WithCloseClient(true))
	require.NoError(t, err)
	require.NoError(t, owner.Close())
	require.NoError(t, owner.Close(), "Close is idempotent")
	_, err = owner.SetNX(t.Context(), "k2", "v", time.Second)
	require.ErrorIs(t, err, rueidis.ErrClosing)
	assert.Equal(t, driver.KindNodeFailure, owner.Classify(err))
	_, err = owner.Eval(context.Background(), driver.ScriptRelease.Source(), []string{"k"}, []string{"v"})
	require.ErrorIs(t, err, rueidis.ErrClosing)
	_, err = client.Do(t.Context(), client.B().Ping().Build()).ToString()
	require.Error(t, err, "the client itself is closed")
}
