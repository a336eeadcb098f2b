package redistest

import (
	"context"
	"crypto/tls"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
// nodes; an IPv6 address ("[::1]:port") is accepted and names its node;
// with one server of three down and one hung, Dial returns within about
// one node timeout, its nodes are named by their addresses, and they lock
// once the servers answer again; closeAll closes every node, may be
// called twice, and leaves no goroutine behind, also after a Locker's
// Close. pkg is the backend's name as its errors start ("goredis").
//
// Call it from a test that is not parallel: it checks for leaks.
func RunDial(t *testing.T, pkg string, dial DialFunc) {
	RequireServer(t)
	t.Run("bad_addresses", func(t *testing.T) { dialBadAddresses(t, pkg, dial) })
	t.Run("ipv6_address", func(t *testing.T) { dialIPv6(t, dial) })
	t.Run("down_and_hung", func(t *testing.T) { dialDownAndHung(t, dial) })
	t.Run("close_all", func(t *testing.T) { dialCloseAll(t, dial) })
}

// DialSecurity is what a backend's WithCredentials, WithTLS and
// WithTLSConfig options set, for RunDialSecurity.
type DialSecurity struct {
	Username, Password string      // WithCredentials(Username, Password)
	TLS                bool        // WithTLS(TLS)
	TLSConfig          *tls.Config // WithTLSConfig(TLSConfig), after WithTLS
}

// SecureDialFunc is a backend's Dial over independent masters with the
// options that s stands for.
type SecureDialFunc func(addrs []string, s DialSecurity) (nodes []core.Node, closeAll func() error, err error)

// RunDialSecurity checks what every backend's credential and TLS options
// promise, against real servers: credentials authenticate, as an ACL user
// or with a password alone, and without them a server with a password
// refuses the lock (NOAUTH); with TLS, a server that accepts connections
// and answers nothing costs a call its context, not a driver's dial or
// handshake timeout, and a server that speaks no TLS fails the call.
// Its subtests are parallel.
func RunDialSecurity(t *testing.T, dial SecureDialFunc) {
	RequireServer(t)
	t.Run("credentials", func(t *testing.T) { t.Parallel(); dialCredentials(t, dial) })
	t.Run("tls_handshake_within_context", func(t *testing.T) { t.Parallel(); dialTLSWithinContext(t, dial) })
	t.Run("tls_to_plain_server", func(t *testing.T) { t.Parallel(); dialTLSToPlainServer(t, dial) })
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
		{[]string{"::1"}, `address "::1" is not host:port (too many colons in address)`},
	} {
		nodes, closeAll, err := dial(tc.addrs)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "%q", tc.addrs)
		assert.ErrorContains(t, err, tc.want)
		assert.Nil(t, nodes)
		assert.Nil(t, closeAll)
	}
}

func dialIPv6(t *testing.T, dial DialFunc) {
	port, err := FreePort()
	require.NoError(t, err)
	addr := "[::1]:" + strconv.Itoa(port)
	nodes, closeAll, err := dial([]string{" " + addr + " "})
	require.NoError(t, err, "nothing listens there: a server that is down, not a bad address")
	require.Len(t, nodes, 1)
	assert.Equal(t, addr, nodes[0].String(), "named by its address, trimmed")
	require.NoError(t, closeAll())
}

func dialDownAndHung(t *testing.T, dial DialFunc) {
	up, hung := StartTestServer(t), StartTestServer(t)
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
	_, err = locker.TryAcquire(TestContext(t), t.Name())
	require.ErrorIs(t, err, core.ErrUnavailable, "one of three answers")

	StartTestServer(t, WithPort(port))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		lock, err := locker.TryAcquire(TestContext(t), t.Name())
		require.NoError(c, err, "two of three, once the down server is up")
		assert.NoError(c, lock.Release(TestContext(t)))
	}, 20*time.Second, 50*time.Millisecond)
	require.NoError(t, hung.Resume())
	RequireHeldEverywhere(t, locker, addrs)
}

func dialCloseAll(t *testing.T, dial DialFunc) {
	addrs := []string{StartTestServer(t).Addr(), StartTestServer(t).Addr(), SilentAddr(t)}
	ignore := goleak.IgnoreCurrent()
	nodes, closeAll, err := dial(addrs)
	require.NoError(t, err)
	ok, err := nodes[0].SetNX(TestContext(t), t.Name(), "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	begin := time.Now()
	require.NoError(t, closeAll())
	assert.Less(t, time.Since(begin), 2*time.Second, "a node still connecting is cut short")
	require.NoError(t, closeAll(), "closeAll may be called twice")
	for i, n := range nodes {
		_, err := n.SetNX(TestContext(t), t.Name(), "w", time.Minute)
		assert.Error(t, err, "node %d is closed", i)
	}
	require.NoError(t, conformance.FindLeaks(conformance.LeakGrace, ignore))

	// A Locker's Close releases its locks and closes the nodes; closeAll
	// after it is harmless.
	nodes, closeAll, err = dial(addrs)
	require.NoError(t, err)
	locker, err := core.New(nodes)
	require.NoError(t, err)
	lock, err := locker.Acquire(TestContext(t), t.Name()+":locker")
	require.NoError(t, err)
	require.NoError(t, locker.Close())
	assert.ErrorIs(t, lock.Err(), core.ErrReleased)
	require.NoError(t, closeAll(), "after the Locker's Close")
	require.NoError(t, conformance.FindLeaks(conformance.LeakGrace, ignore))
}

func dialCredentials(t *testing.T, dial SecureDialFunc) {
	srv := StartTestServer(t)
	// StartServer checks a server with INFO, so the password is set after.
	admin := AdminClient(t, srv.Addr())
	require.NoError(t, admin.Do(TestContext(t), "ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all").Err())
	require.NoError(t, admin.ConfigSet(TestContext(t), "requirepass", "s3cret").Err())

	for name, s := range map[string]DialSecurity{
		"password": {Password: "s3cret"},
		"acl user": {Username: "locker", Password: "pw"},
		"none":     {},
	} {
		t.Run(name, func(t *testing.T) {
			nodes, closeAll, err := dial([]string{srv.Addr()}, s)
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, closeAll()) })
			locker, err := core.New(nodes, core.WithTries(2))
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, locker.Close()) })
			lock, err := locker.Acquire(TestContext(t), t.Name())
			if name == "none" {
				require.Error(t, err)
				assert.ErrorContains(t, err, "NOAUTH")
				return
			}
			require.NoError(t, err)
			require.NoError(t, lock.Release(TestContext(t)))
		})
	}
}

func dialTLSWithinContext(t *testing.T, dial SecureDialFunc) {
	nodes, closeAll, err := dial([]string{SilentAddr(t)}, DialSecurity{TLS: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err = nodes[0].Eval(ctx, "return 1", nil, nil)
	require.Error(t, err)
	assert.Less(t, time.Since(begin), 2*time.Second, "bounded by the context, not a driver's dial or handshake timeout (5 s or more)")
}

func dialTLSToPlainServer(t *testing.T, dial SecureDialFunc) {
	nodes, closeAll, err := dial([]string{StartTestServer(t).Addr()}, DialSecurity{TLSConfig: &tls.Config{InsecureSkipVerify: true}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = nodes[0].Eval(ctx, "return 1", nil, nil)
	require.Error(t, err, "a TLS handshake with a plain server fails or never ends")
}

// RequireDialCluster checks a backend's Dial of the seeds of one Redis
// Cluster (dial passes WithCluster(true)), against a real cluster of
// ClusterMasters masters: Dial makes one node, named "cluster:" and the
// sorted seeds, Sharded, whose locks are held on the cluster, a key on
// each master.
func RequireDialCluster(t *testing.T, dial DialFunc) {
	t.Helper()
	RequireServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster, err := StartCluster(ctx, ClusterMasters)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cluster.Close()) })

	seeds := []string{cluster.Addrs()[2], cluster.Addrs()[0]}
	nodes, closeAll, err := dial(seeds)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	require.Len(t, nodes, 1)
	assert.Equal(t, "cluster:"+strings.Join(slices.Sorted(slices.Values(seeds)), ","), nodes[0].String())
	s, ok := nodes[0].(driver.Sharded)
	require.True(t, ok, "a cluster node implements driver.Sharded")
	assert.True(t, s.Sharded())
	locker, err := core.New(nodes)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, locker.Close()) })
	for m := range ClusterMasters {
		key := keyOfMaster(cluster, m)
		lock, err := locker.Acquire(TestContext(t), key)
		require.NoError(t, err)
		assert.Equal(t, int64(1), cluster.Control().Exists(TestContext(t), key).Val(), "%s, on master %d", key, m)
		require.NoError(t, lock.Release(TestContext(t)))
	}
}

// keyOfMaster returns a key that master m of c serves.
func keyOfMaster(c *Cluster, m int) string {
	for i := 0; ; i++ {
		if key := "dial:" + strconv.Itoa(i); c.MasterOfSlot(driver.HashSlot(key)) == m {
			return key
		}
	}
}
