package rueidis_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core/driver"
)

// plainClient hides every method of a client but those of
// qlrueidis.Client, as a client implemented by a user would.
type plainClient struct{ qlrueidis.Client }

func startServer(t *testing.T) (*redistest.Server, rueidis.Client) {
	t.Helper()
	redistest.RequireServer(t)
	srv, err := redistest.StartServer(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	client, err := rueidis.NewClient(qlrueidis.ClientOption(srv.Addr()))
	require.NoError(t, err)
	t.Cleanup(client.Close)
	return srv, client
}

func TestCapabilitiesWithoutClientMethods(t *testing.T) {
	t.Parallel()
	_, client := startServer(t)
	n, err := qlrueidis.New(plainClient{client})
	require.NoError(t, err)
	ctx := t.Context()

	// Without DoMulti, the calls go one by one, with the same results.
	ok, err := n.SetNX(ctx, "k", "mine", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = n.Eval(ctx, driver.ScriptRelease.Source(), []string{"other"}, []string{"x"})
	require.NoError(t, err)
	calls := []driver.Call{
		{Source: driver.ScriptExtend.Source(), Keys: []string{"k"}, Args: []string{"mine", "60000"}},
		{SHA: "0000000000000000000000000000000000000000", Keys: []string{"k"}},
		{SHA: driver.ScriptRelease.SHA(), Keys: []string{"k"}, Args: []string{"theirs"}},
	}
	n.EvalBatch(ctx, calls)
	require.NoError(t, calls[0].Err)
	assert.Equal(t, int64(1), calls[0].Reply)
	assert.Equal(t, driver.KindNoScript, n.Classify(calls[1].Err))
	require.NoError(t, calls[2].Err)
	assert.Equal(t, int64(0), calls[2].Reply)

	// Without Receive, Watch is unsupported.
	stop, err := n.Watch(ctx, driver.ReleaseChannel("k"), func(string) {})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Nil(t, stop)
}

func TestCapabilitiesAfterClosingOwnedClient(t *testing.T) {
	t.Parallel()
	_, client := startServer(t)
	n, err := qlrueidis.New(client, qlrueidis.WithCloseClient(true))
	require.NoError(t, err)

	// A watch in place when the node closes ends quietly; stop still
	// returns.
	stop, err := n.Watch(t.Context(), driver.ReleaseChannel("k"), func(string) {})
	require.NoError(t, err)
	require.NoError(t, n.Close())
	stop()

	calls := []driver.Call{
		{SHA: driver.ScriptRelease.SHA(), Keys: []string{"k"}, Args: []string{"v"}},
		{Source: driver.ScriptRelease.Source(), Keys: []string{"k"}, Args: []string{"v"}},
	}
	n.EvalBatch(t.Context(), calls)
	for _, c := range calls {
		require.ErrorIs(t, c.Err, rueidis.ErrClosing)
	}
	_, err = n.Watch(t.Context(), driver.ReleaseChannel("k"), func(string) {})
	require.ErrorIs(t, err, rueidis.ErrClosing)
}

// TestWatchUnsubscribes checks that the server forgets a channel once the
// node's last watch of it has stopped, and not before (a stop called twice
// counts once): rueidis leaves the subscription in place when Receive
// returns.
func TestWatchUnsubscribes(t *testing.T) {
	t.Parallel()
	_, client := startServer(t)
	n, err := qlrueidis.New(client)
	require.NoError(t, err)
	ch := driver.ReleaseChannel("k")
	subscribers := func() int64 {
		v, err := client.Do(t.Context(), client.B().PubsubNumsub().Channel(ch).Build()).AsIntMap()
		require.NoError(t, err)
		return v[ch]
	}
	stopA, err := n.Watch(t.Context(), ch, func(string) {})
	require.NoError(t, err)
	stopB, err := n.Watch(t.Context(), ch, func(string) {})
	require.NoError(t, err)
	assert.Equal(t, int64(1), subscribers(), "both watches share the client's connection")
	stopA()
	assert.Equal(t, int64(1), subscribers(), "another watch of the channel remains")
	stopA()
	assert.Equal(t, int64(1), subscribers(), "a second stop of one watch changes nothing")
	stopB()
	assert.Equal(t, int64(0), subscribers(), "the last stop unsubscribes")
}
