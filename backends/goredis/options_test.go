package goredis_test

import (
	"crypto/tls"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/internal/optiontest"
)

// Every With function returns an Option or a DialOption that shows itself
// as written, and New and Dial skip a nil one. The client connects on
// first use, so no server is needed.
func TestOptionsShowAsWritten(t *testing.T) {
	t.Parallel()
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithName":           goredis.WithName("a"),
		"WithCloseClient":    goredis.WithCloseClient(true),
		"WithUnboundedCalls": goredis.WithUnboundedCalls(true),
		"WithCredentials":    goredis.WithCredentials("u", "p"),
		"WithTLS":            goredis.WithTLS(true),
		"WithTLSConfig":      goredis.WithTLSConfig(&tls.Config{}),
		"WithCluster":        goredis.WithCluster(true),
		"WithOptions":        goredis.WithOptions(func(*redis.Options) {}),
		"WithClusterOptions": goredis.WithClusterOptions(func(*redis.ClusterOptions) {}),
	})
	assert.Equal(t, "WithCredentials(...)", goredis.WithCredentials("u", "secret").String(), "credentials are elided")

	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:7001", ContextTimeoutEnabled: true})
	defer client.Close()
	node, err := goredis.New(client, nil, goredis.WithName("a"), nil)
	require.NoError(t, err)
	assert.Equal(t, "a", node.String())
	nodes, closeAll, err := goredis.Dial([]string{"127.0.0.1:7001"}, nil, goredis.WithTLS(false), nil)
	require.NoError(t, err)
	assert.Len(t, nodes, 1)
	require.NoError(t, closeAll())
}
