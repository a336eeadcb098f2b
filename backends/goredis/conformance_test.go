package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, redistest.Harness(func(addr string) (core.Node, func() error, error) {
		rdb := redis.NewClient(goredis.ClientOptions(addr))
		node, err := goredis.New(rdb)
		return node, rdb.Close, err
	}))
}
