package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/core"
)

func TestNewRefusesBadClients(t *testing.T) {
	_, err := goredis.New(nil)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "client is nil")

	var typedNil *redis.Client
	_, err = goredis.New(typedNil)
	require.ErrorIs(t, err, core.ErrInvalidArgument, "a typed nil client is refused, not dereferenced")

	unbounded := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer unbounded.Close()
	_, err = goredis.New(unbounded)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "ContextTimeoutEnabled")

	n, err := goredis.New(unbounded, goredis.WithUnboundedCalls(true))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:1", n.String())
	assert.Same(t, unbounded, n.Client())
}

func TestNames(t *testing.T) {
	single := redis.NewClient(goredis.ClientOptions("127.0.0.1:7001"))
	defer single.Close()
	// The seeds sorted, as backends/rueidis names a cluster.
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7003", "127.0.0.1:7002"}, ContextTimeoutEnabled: true})
	defer cluster.Close()

	for want, c := range map[string]goredis.Client{
		"127.0.0.1:7001":                        single,
		"cluster:127.0.0.1:7002,127.0.0.1:7003": cluster,
	} {
		n, err := goredis.New(c)
		require.NoError(t, err)
		assert.Equal(t, want, n.String())
	}
	n, err := goredis.New(single, goredis.WithName("eu-1"))
	require.NoError(t, err)
	assert.Equal(t, "eu-1", n.String())
}

func TestClientOptions(t *testing.T) {
	o := goredis.ClientOptions("10.0.0.1:6379")
	assert.Equal(t, "10.0.0.1:6379", o.Addr)
	assert.True(t, o.ContextTimeoutEnabled)
	assert.Equal(t, -1, o.MaxRetries)
	assert.Equal(t, 1, o.DialerRetries)
}
