package goredis

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
)

func TestExplainClusterReplies(t *testing.T) {
	moved := errors.New("MOVED 3999 127.0.0.1:7002")
	single := redis.NewClient(ClientOptions("127.0.0.1:1"))
	defer single.Close()
	cluster := redis.NewClusterClient(ClusterOptions("127.0.0.1:1"))
	defer cluster.Close()

	n := &Node{client: single}
	assert.NoError(t, n.explain(nil))
	err := n.explain(moved)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.ErrorIs(t, err, moved)
	assert.Contains(t, err.Error(), "MOVED 3999 127.0.0.1:7002: this server is a Redis Cluster member, not an independent master")
	assert.Contains(t, err.Error(), "redis.NewClusterClient(goredis.ClusterOptions(addrs...))")
	other := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	assert.Equal(t, other, n.explain(other))

	c := &Node{client: cluster}
	assert.Equal(t, moved, c.explain(moved), "a cluster client's own redirection is left alone")
}
