package httplock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// TestMain stops the shared servers after the tests and then checks that
// no goroutine outlived them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(run{m}) }

type run struct{ m *testing.M }

func (r run) Run() int {
	code := r.m.Run()
	shared.close()
	return code
}

// shared holds the three redis-server processes that the tests of this
// package share, started on first use.
var shared servers

type servers struct {
	once sync.Once
	list []*redistest.Server
	err  error
}

func (s *servers) get(t *testing.T) []*redistest.Server {
	t.Helper()
	redistest.RequireServer(t)
	s.once.Do(func() { s.list, s.err = startServers(3) })
	require.NoError(t, s.err)
	return s.list
}

func (s *servers) close() {
	for _, srv := range s.list {
		_ = srv.Close()
	}
}

// startServers starts n servers, each start bounded by a deadline.
func startServers(n int) ([]*redistest.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var list []*redistest.Server
	for range n {
		srv, err := redistest.StartServer(ctx)
		if err != nil {
			for _, s := range list {
				_ = s.Close()
			}
			return nil, err
		}
		list = append(list, srv)
	}
	return list, nil
}

// dedicatedServers starts n servers for one test, closed when it ends.
func dedicatedServers(t *testing.T, n int) []*redistest.Server {
	t.Helper()
	redistest.RequireServer(t)
	list, err := startServers(n)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, srv := range list {
			_ = srv.Close()
		}
	})
	return list
}

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
