package httplock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// TestMain stops the servers the tests share (redistest.SharedServers
// and TestServers) and then checks that no goroutine outlived them.
func TestMain(m *testing.M) { redistest.Main(m) }

// newLocker returns a Locker over one rueidis node per server, closed (with
// its clients) when the test ends.
func newLocker(t *testing.T, list []*redistest.Server, opts ...core.Option) *core.Locker {
	t.Helper()
	nodes := make([]core.Node, 0, len(list))
	for _, srv := range list {
		client, err := rueidis.NewClient(qlrueidis.ClientOption(srv.Addr()))
		require.NoError(t, err)
		node, err := qlrueidis.New(client, qlrueidis.WithCloseClient(true))
		if err != nil {
			client.Close()
			require.NoError(t, err)
		}
		nodes = append(nodes, node)
	}
	locker, err := core.New(nodes, opts...)
	if err != nil {
		for _, n := range nodes {
			_ = n.Close()
		}
		require.NoError(t, err)
	}
	t.Cleanup(func() { _ = locker.Close() })
	return locker
}

// deleteEverywhere deletes key on every server behind the holder's back.
func deleteEverywhere(t *testing.T, list []*redistest.Server, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for _, srv := range list {
		client, err := rueidis.NewClient(qlrueidis.ClientOption(srv.Addr()))
		require.NoError(t, err)
		n, err := client.Do(ctx, client.B().Del().Key(key).Build()).AsInt64()
		client.Close()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "the holder's key was on %s", srv.Addr())
	}
}

// errTimeout marks a test wait that ran out.
var errTimeout = errors.New("test timed out waiting")

// within waits for ch to receive or close, for at most d.
func within[T any](ch <-chan T, d time.Duration) (T, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v, nil
	case <-timer.C:
		var zero T
		return zero, errTimeout
	}
}
