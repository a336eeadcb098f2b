package redigo_test

import (
	"crypto/tls"
	"fmt"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/internal/optiontest"
)

// Every With function returns an Option or a DialOption that shows itself
// as written, and New and Dial skip a nil one. The pools connect on first
// use, so no server is needed.
func TestOptionsShowAsWritten(t *testing.T) {
	t.Parallel()
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithName":          redigo.WithName("a"),
		"WithCloseClient":   redigo.WithCloseClient(true),
		"WithUnboundedDial": redigo.WithUnboundedDial(true),
		"WithCredentials":   redigo.WithCredentials("u", "p"),
		"WithTLS":           redigo.WithTLS(true),
		"WithTLSConfig":     redigo.WithTLSConfig(&tls.Config{}),
		"WithDialOptions":   redigo.WithDialOptions(redis.DialDatabase(3)),
		"WithPool":          redigo.WithPool(func(*redis.Pool) {}),
	})
	assert.Equal(t, "WithCredentials(...)", redigo.WithCredentials("u", "secret").String(), "credentials are elided")

	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", "127.0.0.1:1") }}
	node, err := redigo.New(pool, nil, redigo.WithUnboundedDial(true), redigo.WithName("a"), nil)
	require.NoError(t, err)
	assert.Equal(t, "a", node.String())
	nodes, closeAll, err := redigo.Dial([]string{"127.0.0.1:7001"}, nil, redigo.WithTLS(false), nil)
	require.NoError(t, err)
	assert.Len(t, nodes, 1)
	require.NoError(t, closeAll())
}
