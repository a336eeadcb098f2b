package redigo

import (
	"errors"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
)

func TestExplainClusterReplies(t *testing.T) {
	n := &Node{}
	assert.NoError(t, n.explain(nil))
	moved := redis.Error("MOVED 3999 127.0.0.1:7002")
	err := n.explain(moved)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	var re redis.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, moved, re)
	assert.Contains(t, err.Error(), "MOVED 3999 127.0.0.1:7002: this server is a Redis Cluster member, not an independent master")
	assert.Contains(t, err.Error(), "redigo has no cluster client")
	other := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	assert.Equal(t, other, n.explain(other))
}
