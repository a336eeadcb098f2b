package goredis_test

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// What every backend's Dial promises (redistest.RunDial and
// RunDialSecurity).
func TestDial(t *testing.T) {
	redistest.RunDial(t, "goredis", func(addrs []string) ([]core.Node, func() error, error) { return goredis.Dial(addrs) })
	redistest.RunDialSecurity(t, func(addrs []string, s redistest.DialSecurity) ([]core.Node, func() error, error) {
		return goredis.Dial(addrs, goredis.WithCredentials(s.Username, s.Password), goredis.WithTLS(s.TLS), goredis.WithTLSConfig(s.TLSConfig))
	})
}

// With WithCluster(true), the addresses are the seeds of one cluster, one
// node (redistest.RequireDialCluster).
func TestDialCluster(t *testing.T) {
	t.Parallel()
	redistest.RequireDialCluster(t, func(seeds []string) ([]core.Node, func() error, error) {
		return goredis.Dial(seeds, goredis.WithCluster(true))
	})
}

// Every bad argument gets an error matching core.ErrInvalidArgument that
// quotes it.
func TestDialRefusesBadInput(t *testing.T) {
	t.Parallel()
	addrs := []string{"127.0.0.1:7001", "127.0.0.1:7002"}
	for _, tc := range []struct {
		name  string
		addrs []string
		opts  []goredis.DialOption
		want  string
	}{
		{"unbounded", addrs, []goredis.DialOption{goredis.WithOptions(func(o *redis.Options) { o.ContextTimeoutEnabled = false })},
			"Options.ContextTimeoutEnabled off for 127.0.0.1:7001"},
		{"other address", addrs, []goredis.DialOption{goredis.WithOptions(func(o *redis.Options) { o.Addr = "10.0.0.9:6379" })},
			`changed Options.Addr from "127.0.0.1:7001" to "10.0.0.9:6379"`},
		{"options of a cluster", addrs, []goredis.DialOption{goredis.WithCluster(true), goredis.WithOptions(func(*redis.Options) {})}, "use WithClusterOptions"},
		{"cluster options alone", addrs, []goredis.DialOption{goredis.WithClusterOptions(func(*redis.ClusterOptions) {})}, "it needs WithCluster"},
		{"cluster unbounded", addrs, []goredis.DialOption{goredis.WithCluster(true),
			goredis.WithClusterOptions(func(o *redis.ClusterOptions) { o.ContextTimeoutEnabled = false })}, "ClusterOptions.ContextTimeoutEnabled off"},
		{"cluster slots", addrs, []goredis.DialOption{goredis.WithCluster(true), goredis.WithClusterOptions(func(o *redis.ClusterOptions) {
			o.ClusterSlots = func(context.Context) ([]redis.ClusterSlot, error) { return nil, nil }
		})}, "ClusterOptions.ClusterSlots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, closeAll, err := goredis.Dial(tc.addrs, tc.opts...)
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
	nodes, closeAll, err := goredis.Dial([]string{" redis.example:6380", "10.0.0.2:6379 "},
		goredis.WithCredentials("u", "p"), goredis.WithTLS(true), goredis.WithOptions(func(o *redis.Options) { o.PoolSize = 3 }))
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	assert.Equal(t, "redis.example:6380", nodes[0].String())
	assert.Equal(t, "10.0.0.2:6379", nodes[1].String())
	assert.Implements(t, (*driver.Batcher)(nil), nodes[0])
	assert.Implements(t, (*driver.Watcher)(nil), nodes[0])
	rdb := nodes[0].(interface{ Client() goredis.Client }).Client().(*redis.Client)
	o := rdb.Options()
	assert.Equal(t, "u", o.Username)
	assert.Equal(t, "p", o.Password)
	assert.Equal(t, 3, o.PoolSize)
	assert.True(t, o.ContextTimeoutEnabled)
	assert.Equal(t, 0, o.MaxRetries, "ClientOptions' -1: no retries")
	require.NotNil(t, o.TLSConfig)
	assert.Equal(t, "redis.example", o.TLSConfig.ServerName)
	assert.Equal(t, uint16(tls.VersionTLS12), o.TLSConfig.MinVersion)
	require.NoError(t, nodes[0].Close())
	assert.ErrorIs(t, rdb.Ping(t.Context()).Err(), redis.ErrClosed)
	require.NoError(t, closeAll())

	mine := &tls.Config{ServerName: "mine", MinVersion: tls.VersionTLS13}
	nodes, closeAll, err = goredis.Dial([]string{"127.0.0.1:7003", "127.0.0.1:7002"}, goredis.WithCluster(true), goredis.WithTLSConfig(mine),
		goredis.WithClusterOptions(func(o *redis.ClusterOptions) { o.PoolSize = 2 }))
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	assert.Equal(t, "cluster:127.0.0.1:7002,127.0.0.1:7003", nodes[0].String())
	assert.True(t, nodes[0].(driver.Sharded).Sharded())
	crdb := nodes[0].(interface{ Client() goredis.Client }).Client().(*redis.ClusterClient)
	assert.Equal(t, 2, crdb.Options().PoolSize)
	assert.Equal(t, "mine", crdb.Options().TLSConfig.ServerName)
	assert.NotSame(t, mine, crdb.Options().TLSConfig, "a clone")
	require.NoError(t, closeAll())
}

// Nil means unset: a nil DialOption is skipped, a nil function or TLS
// configuration changes nothing; a later option overrides an earlier one.
func TestDialNilAndOverrides(t *testing.T) {
	t.Parallel()
	nodes, closeAll, err := goredis.Dial([]string{"127.0.0.1:7001", "127.0.0.1:7002"},
		goredis.WithCredentials("u", "p"), nil, goredis.WithOptions(nil), goredis.WithClusterOptions(nil), goredis.WithTLSConfig(nil),
		goredis.WithCluster(true), goredis.WithCluster(false), goredis.WithTLSConfig(&tls.Config{ServerName: "mine"}), goredis.WithTLS(false))
	require.NoError(t, err)
	require.Len(t, nodes, 2, "WithCluster(false) wins")
	o := nodes[0].(interface{ Client() goredis.Client }).Client().(*redis.Client).Options()
	assert.Equal(t, "u", o.Username)
	assert.Nil(t, o.TLSConfig, "WithTLS(false) wins over the configuration")
	require.NoError(t, closeAll())

	for want, opt := range map[string]goredis.DialOption{
		"WithCredentials(...)":    goredis.WithCredentials("u", "p"),
		"WithTLS(true)":           goredis.WithTLS(true),
		"WithTLSConfig(nil)":      goredis.WithTLSConfig(nil),
		"WithTLSConfig(...)":      goredis.WithTLSConfig(&tls.Config{}),
		"WithCluster(false)":      goredis.WithCluster(false),
		"WithOptions(nil)":        goredis.WithOptions(nil),
		"WithOptions(...)":        goredis.WithOptions(func(*redis.Options) {}),
		"WithClusterOptions(nil)": goredis.WithClusterOptions(nil),
	} {
		assert.Equal(t, want, opt.String())
	}
	for want, opt := range map[string]goredis.Option{
		`WithName("a")`:             goredis.WithName("a"),
		"WithCloseClient(true)":     goredis.WithCloseClient(true),
		"WithUnboundedCalls(false)": goredis.WithUnboundedCalls(false),
	} {
		assert.Equal(t, want, opt.String())
	}
}
