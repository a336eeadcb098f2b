package redistest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// DialFunc is a backend's Dial over independent masters, with the options
// under test.
type DialFunc func(addrs []string) (nodes []core.Node, closeAll func() error, err error)

// RunDial checks what every backend's Dial promises, against real
// servers: bad addresses are refused with ErrInvalidArgument and no
// nodes; with one server of three down and one hung, Dial returns within
// about one node timeout, its nodes are named by their addresses, and
// they lock once the servers answer again; closeAll closes every node,
// may be called twice, and leaves no goroutine behind, also after a
// Locker's Close. pkg is the
// backend's name as its errors start ("goredis").
//
// Call it from a test that is not parallel: it checks for leaks.
func RunDial(t *testing.T, pkg string, dial DialFunc) {
	RequireServer(t)
	t.Run("bad_addresses", func(t *testing.T) { dialBadAddresses(t, pkg, dial) })
	t.Run("down_and_hung", func(t *testing.T) { dialDownAndHung(t, dial) })
	t.Run("close_all", func(t *testing.T) { dialCloseAll(t, dial) })
}

func dialBadAddresses(t *testing.T, pkg string, dial DialFunc) {
	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{nil, pkg + ": Dial: no addresses"},
		{[]string{"127.0.0.1:7001", "  "}, `address 1 is empty ("  ")`},
		{[]string{"127.0.0.1:7001", "redis.internal"}, `address "redis.internal" has no port`},
		{[]string{"redis.internal:"}, `address "redis.internal:" has no port`},
		{[]string{"127.0.0.1:99999"}, `address "127.0.0.1:99999" has port 99999, outside 1-65535`},
		{[]string{"127.0.0.1:0"}, `address "127.0.0.1:0" has port 0, outside 1-65535`},
		{[]string{"127.0.0.1:7001", " 127.0.0.1:7001"}, `address "127.0.0.1:7001" is given twice (addresses 0 and 1)`},
	} {
		nodes, closeAll, err := dial(tc.addrs)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "%q", tc.addrs)
		assert.ErrorContains(t, err, tc.want)
		assert.Nil(t, nodes)
		assert.Nil(t, closeAll)
	}
}

func dialDownAndHung(t *testing.T, dial DialFunc) {
	up, hung := dialServer(t), dialServer(t)
	port, err := FreePort()
	require.NoError(t, err)
	addrs := []string{up.Addr(), "127.0.0.1:" + strconv.Itoa(port), hung.Addr()}
	require.NoError(t, hung.Pause())
	t.Cleanup(func() { assert.NoError(t, hung.Resume()) })

	begin := time.Now()
	nodes, closeAll, err := dial(addrs)
	took := time.Since(begin)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	assert.Less(t, took, core.DefaultNodeTimeout+500*time.Millisecond, "about one node timeout at most, not a driver's dial timeout")
	require.Len(t, nodes, 3)
	for i, n := range nodes {
		assert.Equal(t, addrs[i], n.String(), "named by its address")
		if s, ok := n.(driver.Sharded); ok {
			assert.False(t, s.Sharded(), "one server")
		}
	}
	locker, err := core.New(nodes, core.WithTries(1))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, locker.Close()) })
	_, err = locker.TryAcquire(dialCtx(t), t.Name())
	require.ErrorIs(t, err, core.ErrUnavailable, "one of three answers")

	dialServer(t, WithPort(port))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		lock, err := locker.TryAcquire(dialCtx(t), t.Name())
		require.NoError(c, err, "two of three, once the down server is up")
		assert.NoError(c, lock.Release(dialCtx(t)))
	}, 20*time.Second, 50*time.Millisecond)
	require.NoError(t, hung.Resume())
	requireHeldEverywhere(t, locker, addrs)
}

func dialCloseAll(t *testing.T, dial DialFunc) {
	addrs := []string{dialServer(t).Addr(), dialServer(t).Addr(), SilentAddr(t)}
	ignore := goleak.IgnoreCurrent()
	nodes, closeAll, err := dial(addrs)
	require.NoError(t, err)
	ok, err := nodes[0].SetNX(dialCtx(t), t.Name(), "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	begin := time.Now()
	require.NoError(t, closeAll())
	assert.Less(t, time.Since(begin), 2*time.Second, "a node still connecting is cut short")
	require.NoError(t, closeAll(), "closeAll may be called twice")
	for i, n := range nodes {
		_, err := n.SetNX(dialCtx(t), t.Name(), "w", time.Minute)
		assert.Error(t, err, "node %d is closed", i)
	}
	require.NoError(t, conformance.FindLeaks(conformance.LeakGrace, ignore))

	// A Locker's Close releases its locks and closes the nodes; closeAll
	// after it is harmless.
	nodes, closeAll, err = dial(addrs)
	require.NoError(t, err)
	locker, err := core.New(nodes)
	require.NoError(t, err)
	lock, err := locker.Acquire(dialCtx(t), t.Name()+":locker")
	require.NoError(t, err)
	require.NoError(t, locker.Close())
	assert.ErrorIs(t, lock.Err(), core.ErrReleased)
	require.NoError(t, closeAll(), "after the Locker's Close")
	require.NoError(t, conformance.FindLeaks(conformance.LeakGrace, ignore))
}

// dialServer starts a redis-server for one test.
func dialServer(t *testing.T, opts ...ServerOption) *Server {
	t.Helper()
	srv, err := StartServer(t.Context(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	return srv
}

// dialCtx is a context bounded for one step of a test.
func dialCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// requireHeldEverywhere acquires fresh keys until one is held on every
// server of addrs (a server just back may miss a round or two).
func requireHeldEverywhere(t *testing.T, locker *core.Locker, addrs []string) {
	t.Helper()
	i := 0
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		i++
		key := t.Name() + ":" + strconv.Itoa(i)
		lock, err := locker.Acquire(dialCtx(t), key)
		require.NoError(c, err)
		defer func() { assert.NoError(c, lock.Release(dialCtx(t))) }()
		for _, a := range addrs {
			admin := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
			assert.Equal(c, int64(1), admin.Exists(dialCtx(t), key).Val(), "held on %s", a)
			_ = admin.Close()
		}
	}, 20*time.Second, 50*time.Millisecond)
}
