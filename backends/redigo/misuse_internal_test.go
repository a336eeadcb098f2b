package redigo

import (
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/quorumlock/quorumlock/conformance/misuse"
)

func TestExplainClusterReplies(t *testing.T) {
	n := &Node{}
	misuse.RequireExplains(t, n.explain, redis.Error("MOVED 3999 127.0.0.1:7002"), "redigo has no cluster client")
}
