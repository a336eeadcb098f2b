package goredis

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/conformance/misuse"
)

func TestExplainClusterReplies(t *testing.T) {
	moved := errors.New("MOVED 3999 127.0.0.1:7002")
	single := redis.NewClient(ClientOptions("127.0.0.1:1"))
	defer single.Close()
	cluster := redis.NewClusterClient(ClusterOptions("127.0.0.1:1"))
	defer cluster.Close()

	n := &Node{client: single}
	misuse.RequireExplains(t, n.explain, moved, "redis.NewClusterClient(goredis.ClusterOptions(addrs...))")

	c := &Node{client: cluster}
	assert.Equal(t, moved, c.explain(moved), "a cluster client's own redirection is left alone")
}
