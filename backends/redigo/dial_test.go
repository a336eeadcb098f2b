package redigo_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// serverDo runs one command on a connection of the test's own to addr.
func serverDo(ctx context.Context, addr string, cmd string, args ...any) (any, error) {
	conn, err := redis.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return redis.DoContext(conn, ctx, cmd, args...)
}

// What every backend's Dial promises (redistest.RunDial and
// RunDialSecurity).
func TestDial(t *testing.T) {
	redistest.RunDial(t, "redigo", func(addrs []string) ([]core.Node, func() error, error) { return redigo.Dial(addrs) })
	redistest.RunDialSecurity(t, func(addrs []string, s redistest.DialSecurity) ([]core.Node, func() error, error) {
		return redigo.Dial(addrs, redigo.WithCredentials(s.Username, s.Password), redigo.WithTLS(s.TLS), redigo.WithTLSConfig(s.TLSConfig))
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
		opts  []redigo.DialOption
		want  string
	}{
		{"unbounded", addrs, []redigo.DialOption{redigo.WithPool(func(p *redis.Pool) {
			p.DialContext, p.Dial = nil, func() (redis.Conn, error) { return redis.Dial("tcp", "127.0.0.1:7001") }
		})}, "WithPool left Pool.DialContext nil for 127.0.0.1:7001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, closeAll, err := redigo.Dial(tc.addrs, tc.opts...)
			t.Log(err)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			assert.ErrorContains(t, err, tc.want)
			assert.Nil(t, nodes)
			assert.Nil(t, closeAll)
		})
	}
}

// Nil means unset: a nil DialOption is skipped, a nil function or TLS
// configuration changes nothing; a later option overrides an earlier one.
// Dial connects on first use, so no server is needed.
func TestDialNilAndOverrides(t *testing.T) {
	t.Parallel()
	nodes, closeAll, err := redigo.Dial([]string{"127.0.0.1:7001", "127.0.0.1:7002"},
		nil, redigo.WithPool(nil), redigo.WithTLSConfig(nil), redigo.WithDialOptions(),
		redigo.WithTLSConfig(&tls.Config{ServerName: "mine"}), redigo.WithTLS(false))
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	require.NoError(t, closeAll())

	for want, opt := range map[string]redigo.DialOption{
		"WithCredentials(...)": redigo.WithCredentials("u", "p"),
		"WithTLS(true)":        redigo.WithTLS(true),
		"WithTLSConfig(nil)":   redigo.WithTLSConfig(nil),
		"WithTLSConfig(...)":   redigo.WithTLSConfig(&tls.Config{}),
		"WithPool(nil)":        redigo.WithPool(nil),
		"WithPool(...)":        redigo.WithPool(func(*redis.Pool) {}),
		"WithDialOptions(...)": redigo.WithDialOptions(redis.DialDatabase(3)),
	} {
		assert.Equal(t, want, opt.String())
	}
	for want, opt := range map[string]redigo.Option{
		`WithName("a")`:            redigo.WithName("a"),
		"WithCloseClient(true)":    redigo.WithCloseClient(true),
		"WithUnboundedDial(false)": redigo.WithUnboundedDial(false),
	} {
		assert.Equal(t, want, opt.String())
	}
}

// The options reach the pools, nodes are named by their addresses as
// given, and closing a node closes its pool.
func TestDialOptionsAndNames(t *testing.T) {
	t.Parallel()
	srv := redistest.StartTestServer(t)
	nodes, closeAll, err := redigo.Dial([]string{" " + srv.Addr() + " "},
		redigo.WithDialOptions(redis.DialDatabase(3)), redigo.WithPool(func(p *redis.Pool) { p.MaxActive = 5 }))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	require.Len(t, nodes, 1)
	node := nodes[0]
	assert.Equal(t, srv.Addr(), node.String())
	assert.Implements(t, (*driver.Batcher)(nil), node)
	assert.Implements(t, (*driver.Watcher)(nil), node)
	pool := node.(interface{ Pool() redigo.Pool }).Pool().(*redis.Pool)
	assert.Equal(t, 5, pool.MaxActive)
	assert.Equal(t, 64, pool.MaxIdle, "NewPool's settings")

	ok, err := node.SetNX(redistest.TestContext(t), t.Name(), "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	n, err := redis.Int(serverDo(redistest.TestContext(t), srv.Addr(), "EXISTS", t.Name()))
	require.NoError(t, err)
	assert.Zero(t, n, "not in database 0")
	conn, err := redis.DialContext(redistest.TestContext(t), "tcp", srv.Addr(), redis.DialDatabase(3))
	require.NoError(t, err)
	defer conn.Close()
	n, err = redis.Int(conn.Do("EXISTS", t.Name()))
	require.NoError(t, err)
	assert.Equal(t, 1, n, "in database 3, as WithDialOptions asked")

	require.NoError(t, node.Close())
	_, err = pool.GetContext(redistest.TestContext(t))
	assert.ErrorContains(t, err, "closed pool")
}
