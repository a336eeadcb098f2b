package fxmodule_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/backends/redigo"
	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/fxmodule"
)

// The nodes built from a Config own their clients: closing a node (as the
// Locker's Close does) closes its client. They keep the backends'
// capabilities.
func TestBuiltNodesOwnTheirClients(t *testing.T) {
	addr := servers(t)[0]
	for _, name := range drivers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			nodes, err := fxmodule.BuildNodes(fxmodule.Config{Driver: name, Addrs: []string{addr}})
			require.NoError(t, err)
			require.Len(t, nodes, 1)
			node := nodes[0]
			assert.Equal(t, addr, node.String())
			assert.Implements(t, (*driver.Batcher)(nil), node)
			assert.Implements(t, (*driver.Watcher)(nil), node)
			reply, err := node.Eval(ctx, "return 1", nil, nil)
			require.NoError(t, err)
			assert.Equal(t, int64(1), reply)

			require.NoError(t, node.Close())
			switch name {
			case fxmodule.DriverGoRedis:
				rdb := node.(interface{ Client() goredis.Client }).Client().(*redis.Client)
				assert.ErrorIs(t, rdb.Ping(ctx).Err(), redis.ErrClosed)
			case fxmodule.DriverRedigo:
				_, err := node.(interface{ Pool() redigo.Pool }).Pool().GetContext(ctx)
				assert.ErrorContains(t, err, "closed pool")
			case fxmodule.DriverRueidis:
				if n, ok := node.(*qlrueidis.Node); ok {
					c := n.Client().(rueidis.Client)
					assert.ErrorIs(t, c.Do(ctx, c.B().Ping().Build()).Error(), rueidis.ErrClosing)
				} else {
					// A *driver.Late: the client took longer than Dial's
					// wait (one node timeout) to connect, as on a loaded
					// machine; closed with it all the same.
					_, err := node.Eval(ctx, "return 1", nil, nil)
					assert.ErrorIs(t, err, rueidis.ErrClosing)
				}
			case fxmodule.DriverValkey:
				// Closed with its client, or, if still connecting, cut short.
				_, err := node.Eval(ctx, "return 1", nil, nil)
				assert.ErrorIs(t, err, valkey.ErrClosing)
			}
		})
	}
}

// Username, Password and TLS reach the clients the module builds.
func TestBuiltClientsGetCredentialsAndTLS(t *testing.T) {
	t.Parallel()
	cfg := fxmodule.Config{Driver: fxmodule.DriverGoRedis, Addrs: []string{"redis.example:6380"}, Username: "u", Password: "p", TLS: true}
	nodes, err := fxmodule.BuildNodes(cfg)
	require.NoError(t, err)
	rdb := nodes[0].(interface{ Client() goredis.Client }).Client().(*redis.Client)
	assert.Equal(t, "u", rdb.Options().Username)
	assert.Equal(t, "p", rdb.Options().Password)
	require.NotNil(t, rdb.Options().TLSConfig)
	assert.Equal(t, "redis.example", rdb.Options().TLSConfig.ServerName)
	require.NoError(t, nodes[0].Close())

	cfg.Cluster = true
	nodes, err = fxmodule.BuildNodes(cfg)
	require.NoError(t, err)
	crdb := nodes[0].(interface{ Client() goredis.Client }).Client().(*redis.ClusterClient)
	assert.Equal(t, "p", crdb.Options().Password)
	assert.NotNil(t, crdb.Options().TLSConfig)
	require.NoError(t, nodes[0].Close())

	cfg.Driver, cfg.Cluster = fxmodule.DriverRedigo, false
	nodes, err = fxmodule.BuildNodes(cfg)
	require.NoError(t, err)
	assert.Equal(t, "redis.example:6380", nodes[0].String())
	require.NoError(t, nodes[0].Close())
}

// Against a server that requires a password, every driver authenticates
// with Config's credentials.
func TestPassword(t *testing.T) {
	t.Parallel()
	srv := redistest.TestServers(t, 1)[0]
	require.NoError(t, plainClient(t, srv.Addr()).ConfigSet(testCtx(t), "requirepass", "s3cret").Err())
	addrs := []string{srv.Addr()}
	for _, name := range drivers {
		t.Run(name, func(t *testing.T) {
			app, _ := newApp(t, fxmodule.Config{Driver: name, Addrs: addrs})
			err := app.Start(testCtx(t))
			require.Error(t, err, "no password")
			assert.ErrorContains(t, err, "NOAUTH")

			app, locker := newApp(t, fxmodule.Config{Driver: name, Addrs: addrs, Username: "default", Password: "s3cret"})
			app.RequireStart()
			ctx := testCtx(t)
			lock, err := locker.Acquire(ctx, "fxmodule:"+t.Name())
			require.NoError(t, err)
			require.NoError(t, lock.Release(ctx))
			app.RequireStop()
		})
	}
}
