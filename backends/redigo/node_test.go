package redigo_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

func TestNewRefusesBadPools(t *testing.T) {
	_, err := redigo.New(nil)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "pool is nil")

	var typedNil *redis.Pool
	_, err = redigo.New(typedNil)
	require.ErrorIs(t, err, core.ErrInvalidArgument, "a typed nil pool is refused, not dereferenced")

	_, err = redigo.New(&redis.Pool{})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "neither Dial nor DialContext")

	plain := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", "127.0.0.1:1") }}
	_, err = redigo.New(plain)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "DialContext")

	_, err = redigo.New(plain, redigo.WithUnboundedDial(true))
	require.ErrorIs(t, err, core.ErrInvalidArgument, "unnamed, and NewPool did not make it")
	assert.Contains(t, err.Error(), `WithName("host:port")`)
	n, err := redigo.New(plain, redigo.WithUnboundedDial(true), redigo.WithName("127.0.0.1:1"))
	require.NoError(t, err)
	assert.Same(t, plain, n.Pool())
}

func TestNames(t *testing.T) {
	a, b := redigo.NewPool("127.0.0.1:1"), redigo.NewPool("127.0.0.1:1")
	na, err := redigo.New(a)
	require.NoError(t, err)
	nb, err := redigo.New(b)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:1", na.String(), "named after the address NewPool dials")
	assert.Equal(t, na.String(), nb.String(), "in every process alike")

	named, err := redigo.New(a, redigo.WithName("eu-1"))
	require.NoError(t, err)
	assert.Equal(t, "eu-1", named.String())
}

func TestNewPoolDialsWithContext(t *testing.T) {
	p := redigo.NewPool("127.0.0.1:1")
	defer p.Close()
	require.NotNil(t, p.DialContext)
	assert.Nil(t, p.Dial)
	assert.Equal(t, 64, p.MaxIdle)

	// A cancelled context is never sent, and is classified as such.
	n, err := redigo.New(p)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = n.SetNX(ctx, "k", "v", time.Second)
	require.Error(t, err)
	assert.Equal(t, driver.KindContext, n.Classify(err))

	// A server that refuses connections is a node failure.
	_, err = n.SetNX(context.Background(), "k", "v", time.Second)
	require.Error(t, err)
	assert.Equal(t, driver.KindNodeFailure, n.Classify(err))
}
