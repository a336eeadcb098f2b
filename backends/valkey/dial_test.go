package valkey_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"

	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// What every backend's Dial promises (redistest.RunDial and
// RunDialSecurity).
func TestDial(t *testing.T) {
	redistest.RunDial(t, "valkey", func(addrs []string) ([]core.Node, func() error, error) { return qlvalkey.Dial(addrs) })
	redistest.RunDialSecurity(t, func(addrs []string, s redistest.DialSecurity) ([]core.Node, func() error, error) {
		return qlvalkey.Dial(addrs, qlvalkey.WithCredentials(s.Username, s.Password), qlvalkey.WithTLS(s.TLS), qlvalkey.WithTLSConfig(s.TLSConfig))
	})
}

// A node whose client is still connecting fails a call when the call's
// context ends; closing it cuts the connection attempt short instead of
// waiting for valkey-go's dial timeout, and leaves no goroutine behind.
func TestDialCloseWhileConnecting(t *testing.T) {
	live, silent := redistest.StartTestServer(t).Addr(), redistest.SilentAddr(t)
	ignore := goleak.IgnoreCurrent()

	nodes, closeAll, err := qlvalkey.Dial([]string{live, silent})
	require.NoError(t, err)
	require.IsType(t, (*driver.Late)(nil), nodes[1])
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = nodes[1].Eval(ctx, "return 1", nil, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, driver.KindContext, nodes[1].Classify(err))

	begin := time.Now()
	require.NoError(t, closeAll())
	assert.Less(t, time.Since(begin), 2*time.Second, "not valkey-go's 5 s dial timeout")
	require.NoError(t, closeAll(), "idempotent")
	_, err = nodes[0].Eval(redistest.TestContext(t), "return 1", nil, nil)
	require.ErrorIs(t, err, valkey.ErrClosing)
	_, err = nodes[1].Eval(redistest.TestContext(t), "return 1", nil, nil)
	require.Error(t, err)
	assert.Equal(t, driver.KindNodeFailure, nodes[1].Classify(err))
	require.NoError(t, conformance.FindLeaks(conformance.LeakGrace, ignore))
}

// Bad arguments get an error matching core.ErrInvalidArgument that says
// what is wrong; nil options are skipped.
func TestDialRefusesBadInput(t *testing.T) {
	t.Parallel()
	addrs := []string{"127.0.0.1:7001", "127.0.0.1:7002"}
	option := func(fn func(o *valkey.ClientOption)) []qlvalkey.DialOption {
		return []qlvalkey.DialOption{nil, qlvalkey.WithClientOption(nil), qlvalkey.WithClientOption(fn)}
	}
	for _, tc := range []struct {
		name  string
		addrs []string
		opts  []qlvalkey.DialOption
		want  string
	}{
		{"other address", addrs, option(func(o *valkey.ClientOption) { o.InitAddress = []string{"10.0.0.9:6379"} }), "WithClientOption changed ClientOption.InitAddress"},
		{"not single", addrs, option(func(o *valkey.ClientOption) { o.ForceSingleClient = false }), "turned ClientOption.ForceSingleClient off"},
		{"no pipelining", addrs, option(func(o *valkey.ClientOption) { o.AlwaysPipelining = false }), "turned ClientOption.AlwaysPipelining off"},
		{"multiplex", addrs, option(func(o *valkey.ClientOption) { o.PipelineMultiplex = 2 }), "set ClientOption.PipelineMultiplex to 2"},
		{"sentinel", addrs, option(func(o *valkey.ClientOption) { o.Sentinel.MasterSet = "mymaster" }), "set ClientOption.Sentinel"},
		{"replicas", addrs, option(func(o *valkey.ClientOption) { o.Standalone.ReplicaAddress = []string{"127.0.0.1:7009"} }), "set ClientOption.Standalone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, closeAll, err := qlvalkey.Dial(tc.addrs, tc.opts...)
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
	nodes, closeAll, err := qlvalkey.Dial([]string{srv.Addr() + " "}, qlvalkey.WithTLSConfig(nil), qlvalkey.WithCluster(false),
		qlvalkey.WithClientOption(func(o *valkey.ClientOption) { o.ClientName = "dial-test"; o.SelectDB = 3 }))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	node := nodes[0]
	assert.Equal(t, srv.Addr(), node.String())
	ok, err := node.SetNX(redistest.TestContext(t), t.Name(), "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	admin := redistest.AdminClient(t, srv.Addr())
	assert.Contains(t, admin.ClientList(redistest.TestContext(t)).Val(), "name=dial-test")
	require.NoError(t, admin.Do(redistest.TestContext(t), "SELECT", 3).Err())
	assert.Equal(t, int64(1), admin.Exists(redistest.TestContext(t), t.Name()).Val(), "in database 3")
	require.NoError(t, node.Close())
	_, err = node.SetNX(redistest.TestContext(t), t.Name(), "v", time.Minute)
	require.ErrorIs(t, err, valkey.ErrClosing)

	// A later option overrides an earlier one: WithTLS(false) after
	// WithTLSConfig leaves plain TCP.
	nodes, closePlain, err := qlvalkey.Dial([]string{srv.Addr()}, qlvalkey.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}), qlvalkey.WithTLS(false))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closePlain()) })
	_, err = nodes[0].Eval(redistest.TestContext(t), "return 1", nil, nil)
	require.NoError(t, err, "WithTLS(false) wins: plain TCP")

	for want, opt := range map[string]interface{ String() string }{
		"WithCredentials(...)":   qlvalkey.WithCredentials("u", "p"),
		"WithTLS(true)":          qlvalkey.WithTLS(true),
		"WithTLSConfig(...)":     qlvalkey.WithTLSConfig(&tls.Config{}),
		"WithCluster(false)":     qlvalkey.WithCluster(false),
		"WithClientOption(...)":  qlvalkey.WithClientOption(func(*valkey.ClientOption) {}),
		"WithClientOption(nil)":  qlvalkey.WithClientOption(nil),
		"WithCloseClient(false)": qlvalkey.WithCloseClient(false),
		`WithName("")`:           qlvalkey.WithName(""),
	} {
		assert.Equal(t, want, opt.String())
	}
}

// With WithCluster(true), the addresses are the seeds of one cluster, one
// node (redistest.RequireDialCluster); over a server that is not a cluster
// member, Dial (or the node, when the client was not made within Dial's
// wait) refuses.
func TestDialCluster(t *testing.T) {
	t.Parallel()
	redistest.RequireDialCluster(t, func(seeds []string) ([]core.Node, func() error, error) {
		return qlvalkey.Dial(seeds, qlvalkey.WithCluster(true))
	})

	nodes, closeSingle, err := qlvalkey.Dial([]string{redistest.StartTestServer(t).Addr()}, qlvalkey.WithCluster(true))
	if err == nil {
		t.Cleanup(func() { assert.NoError(t, closeSingle()) })
		_, err = nodes[0].Eval(redistest.TestContext(t), "return 1", nil, nil)
	}
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, "is not a Redis Cluster")
}
