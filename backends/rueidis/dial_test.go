package rueidis_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// What every backend's Dial promises (redistest.RunDial and
// RunDialSecurity).
func TestDial(t *testing.T) {
	redistest.RunDial(t, "rueidis", func(addrs []string) ([]core.Node, func() error, error) { return qlrueidis.Dial(addrs) })
	redistest.RunDialSecurity(t, func(addrs []string, s redistest.DialSecurity) ([]core.Node, func() error, error) {
		return qlrueidis.Dial(addrs, qlrueidis.WithCredentials(s.Username, s.Password), qlrueidis.WithTLS(s.TLS), qlrueidis.WithTLSConfig(s.TLSConfig))
	})
}

// Dial does not wait for a server that is hung (rueidis would connect to
// it for its dial timeout, 5 s): its node waits for the client within each
// call's context, and works once the server answers again.
func TestDialWithAServerHung(t *testing.T) {
	t.Parallel()
	hung := redistest.StartTestServer(t)
	addrs := []string{redistest.StartTestServer(t).Addr(), hung.Addr(), redistest.StartTestServer(t).Addr()}
	require.NoError(t, hung.Pause())
	t.Cleanup(func() { assert.NoError(t, hung.Resume()) })

	resume := time.AfterFunc(2*time.Second, func() { _ = hung.Resume() })
	begin := time.Now()
	nodes, closeAll, err := qlrueidis.Dial(addrs)
	took := time.Since(begin)
	require.True(t, resume.Stop(), "Dial returned before the hung server was resumed")
	require.NoError(t, err)
	assert.Less(t, took, time.Second)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	require.IsType(t, (*driver.Late)(nil), nodes[1], "the hung server's client is still connecting")
	assert.Equal(t, hung.Addr(), nodes[1].String())
	assert.Implements(t, (*driver.Batcher)(nil), nodes[1])
	assert.Implements(t, (*driver.Watcher)(nil), nodes[1])
	assert.False(t, nodes[1].(driver.Sharded).Sharded())

	locker, err := core.New(nodes)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, locker.Close()) })
	lock, err := locker.Acquire(redistest.TestContext(t), t.Name())
	require.NoError(t, err, "two of three are a quorum")
	require.NoError(t, lock.Release(redistest.TestContext(t)))

	require.NoError(t, hung.Resume())
	redistest.RequireHeldEverywhere(t, locker, addrs)
}

// A node whose client is still connecting fails a call when the call's
// context ends, as a hung server's node does; closing it cuts the
// connection attempt short instead of waiting for rueidis's dial timeout,
// and leaves no goroutine behind.
func TestDialCloseWhileConnecting(t *testing.T) {
	live, silent := redistest.StartTestServer(t).Addr(), redistest.SilentAddr(t)
	ignore := goleak.IgnoreCurrent()

	nodes, closeAll, err := qlrueidis.Dial([]string{live, silent})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err = nodes[1].Eval(ctx, "return 1", nil, nil)
	took := time.Since(begin)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, driver.KindContext, nodes[1].Classify(err))
	assert.Less(t, took, time.Second)
	batch := []driver.Call{{Source: "return 1"}}
	nodes[1].(driver.Batcher).EvalBatch(ctx, batch)
	require.ErrorIs(t, batch[0].Err, context.DeadlineExceeded)

	begin = time.Now()
	require.NoError(t, closeAll())
	assert.Less(t, time.Since(begin), 2*time.Second, "not rueidis's 5 s dial timeout")
	require.NoError(t, closeAll(), "idempotent")
	_, err = nodes[1].Eval(redistest.TestContext(t), "return 1", nil, nil)
	require.ErrorIs(t, err, rueidis.ErrClosing)
	assert.Equal(t, driver.KindNodeFailure, nodes[1].Classify(err))
	require.NoError(t, conformance.FindLeaks(conformance.LeakGrace, ignore))
}

// WithConnectWait sets how long Dial waits for a client to connect.
func TestDialConnectWait(t *testing.T) {
	t.Parallel()
	srv := redistest.StartTestServer(t)
	require.NoError(t, srv.Pause())
	t.Cleanup(func() { assert.NoError(t, srv.Resume()) })
	time.AfterFunc(200*time.Millisecond, func() { _ = srv.Resume() })
	nodes, closeAll, err := qlrueidis.Dial([]string{srv.Addr()}, qlrueidis.WithConnectWait(4*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	require.IsType(t, (*qlrueidis.Node)(nil), nodes[0], "Dial waited for the client")

	require.NoError(t, srv.Pause())
	nodes, closeAll, err = qlrueidis.Dial([]string{srv.Addr()}, qlrueidis.WithConnectWait(0))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	require.IsType(t, (*driver.Late)(nil), nodes[0], "Dial did not wait for the client")
	require.NoError(t, srv.Resume())
	reply, err := nodes[0].Eval(redistest.TestContext(t), "return 1", nil, nil)
	require.NoError(t, err, "a node Dial did not wait for works once its client is made")
	assert.Equal(t, int64(1), reply)
}

// Every bad argument gets an error matching core.ErrInvalidArgument that
// quotes it.
func TestDialRefusesBadInput(t *testing.T) {
	t.Parallel()
	addrs := []string{"127.0.0.1:7001", "127.0.0.1:7002"}
	option := func(fn func(o *rueidis.ClientOption)) []qlrueidis.DialOption {
		return []qlrueidis.DialOption{qlrueidis.WithClientOption(fn)}
	}
	for _, tc := range []struct {
		name  string
		addrs []string
		opts  []qlrueidis.DialOption
		want  string
	}{
		{"negative wait", addrs, []qlrueidis.DialOption{qlrueidis.WithConnectWait(-time.Second)}, "WithConnectWait(-1s): the wait is negative"},
		{"other address", addrs, option(func(o *rueidis.ClientOption) { o.InitAddress = []string{"10.0.0.9:6379"} }),
			`changed ClientOption.InitAddress from ["127.0.0.1:7001"] to ["10.0.0.9:6379"]`},
		{"not single", addrs, option(func(o *rueidis.ClientOption) { o.ForceSingleClient = false }), "turned ClientOption.ForceSingleClient off for 127.0.0.1:7001"},
		{"single cluster", addrs, append(option(func(o *rueidis.ClientOption) { o.ForceSingleClient = true }), qlrueidis.WithCluster(true)),
			"set ClientOption.ForceSingleClient"},
		{"no pipelining", addrs, option(func(o *rueidis.ClientOption) { o.AlwaysPipelining = false }), "turned ClientOption.AlwaysPipelining off"},
		{"multiplex", addrs, option(func(o *rueidis.ClientOption) { o.PipelineMultiplex = 2 }), "set ClientOption.PipelineMultiplex to 2"},
		{"sentinel", addrs, option(func(o *rueidis.ClientOption) { o.Sentinel.MasterSet = "mymaster" }), "set ClientOption.Sentinel"},
		{"replicas", addrs, option(func(o *rueidis.ClientOption) { o.Standalone.ReplicaAddress = []string{"127.0.0.1:7009"} }),
			"set ClientOption.Standalone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, closeAll, err := qlrueidis.Dial(tc.addrs, tc.opts...)
			t.Log(err)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			assert.ErrorContains(t, err, tc.want)
			assert.Nil(t, nodes)
			assert.Nil(t, closeAll)
		})
	}
}

// The options reach the clients, nodes are named by their addresses as
// given, and closing a node closes its client.
func TestDialOptionsAndNames(t *testing.T) {
	t.Parallel()
	srv := redistest.StartTestServer(t)
	nodes, closeAll, err := qlrueidis.Dial([]string{srv.Addr() + " "},
		qlrueidis.WithClientOption(func(o *rueidis.ClientOption) { o.ClientName = "dial-test"; o.SelectDB = 3 }))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	node := nodes[0]
	assert.Equal(t, srv.Addr(), node.String())
	require.IsType(t, (*qlrueidis.Node)(nil), node)
	assert.Implements(t, (*driver.Batcher)(nil), node)
	assert.Implements(t, (*driver.Watcher)(nil), node)

	ok, err := node.SetNX(redistest.TestContext(t), t.Name(), "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	admin := redistest.AdminClient(t, srv.Addr())
	assert.Contains(t, admin.ClientList(redistest.TestContext(t)).Val(), "name=dial-test")
	require.NoError(t, admin.Do(redistest.TestContext(t), "SELECT", 3).Err())
	assert.Equal(t, int64(1), admin.Exists(redistest.TestContext(t), t.Name()).Val(), "in database 3")

	require.NoError(t, node.Close())
	c := node.(*qlrueidis.Node).Client().(rueidis.Client)
	assert.ErrorIs(t, c.Do(redistest.TestContext(t), c.B().Ping().Build()).Error(), rueidis.ErrClosing)
}

// A dial function of the user's, DialCtxFn or the deprecated DialFn, is
// the one the client connects with.
func TestDialUsesTheDialFunction(t *testing.T) {
	t.Parallel()
	srv := redistest.StartTestServer(t)
	for name, set := range map[string]func(o *rueidis.ClientOption, dialed *atomic.Int32){
		"DialCtxFn": func(o *rueidis.ClientOption, dialed *atomic.Int32) {
			o.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
				dialed.Add(1)
				return d.DialContext(ctx, "tcp", dst)
			}
		},
		"DialFn": func(o *rueidis.ClientOption, dialed *atomic.Int32) {
			o.DialFn = func(dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
				dialed.Add(1)
				return d.Dial("tcp", dst)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			var dialed atomic.Int32
			nodes, closeAll, err := qlrueidis.Dial([]string{srv.Addr()}, qlrueidis.WithConnectWait(5*time.Second),
				qlrueidis.WithClientOption(func(o *rueidis.ClientOption) { set(o, &dialed) }))
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, closeAll()) })
			_, err = nodes[0].Eval(redistest.TestContext(t), "return 1", nil, nil)
			require.NoError(t, err)
			assert.Positive(t, dialed.Load())
		})
	}
}

// Nil means unset: a nil DialOption is skipped, a nil function or TLS
// configuration changes nothing; a later option overrides an earlier one.
func TestDialNilAndOverrides(t *testing.T) {
	t.Parallel()
	srv := redistest.StartTestServer(t)
	nodes, closeAll, err := qlrueidis.Dial([]string{srv.Addr()},
		nil, qlrueidis.WithClientOption(nil), qlrueidis.WithTLSConfig(nil), qlrueidis.WithCluster(true), qlrueidis.WithCluster(false),
		qlrueidis.WithTLSConfig(&tls.Config{ServerName: "mine"}), qlrueidis.WithTLS(false), qlrueidis.WithConnectWait(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	require.Len(t, nodes, 1)
	assert.False(t, nodes[0].(driver.Sharded).Sharded(), "WithCluster(false) wins")
	_, err = nodes[0].Eval(redistest.TestContext(t), "return 1", nil, nil)
	require.NoError(t, err, "WithTLS(false) wins: plain TCP")

	for want, opt := range map[string]qlrueidis.DialOption{
		"WithCredentials(...)":  qlrueidis.WithCredentials("u", "p"),
		"WithTLS(true)":         qlrueidis.WithTLS(true),
		"WithTLSConfig(nil)":    qlrueidis.WithTLSConfig(nil),
		"WithTLSConfig(...)":    qlrueidis.WithTLSConfig(&tls.Config{}),
		"WithCluster(true)":     qlrueidis.WithCluster(true),
		"WithClientOption(nil)": qlrueidis.WithClientOption(nil),
		"WithClientOption(...)": qlrueidis.WithClientOption(func(*rueidis.ClientOption) {}),
		"WithConnectWait(50ms)": qlrueidis.WithConnectWait(50 * time.Millisecond),
	} {
		assert.Equal(t, want, opt.String())
	}
	for want, opt := range map[string]qlrueidis.Option{
		`WithName("a")`:          qlrueidis.WithName("a"),
		"WithCloseClient(false)": qlrueidis.WithCloseClient(false),
	} {
		assert.Equal(t, want, opt.String())
	}
}

// With WithCluster(true), the addresses are the seeds of one cluster, one
// node (redistest.RequireDialCluster); over a server that is not a cluster
// member, Dial refuses.
func TestDialCluster(t *testing.T) {
	t.Parallel()
	redistest.RequireDialCluster(t, func(seeds []string) ([]core.Node, func() error, error) {
		return qlrueidis.Dial(seeds, qlrueidis.WithCluster(true), qlrueidis.WithConnectWait(5*time.Second))
	})

	_, _, err := qlrueidis.Dial([]string{redistest.StartTestServer(t).Addr()}, qlrueidis.WithCluster(true), qlrueidis.WithConnectWait(5*time.Second))
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, "is not a Redis Cluster")
}
