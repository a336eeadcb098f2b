package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// single builds a node over one server, as a user would.
func single(addr string) (core.Node, func() error, error) {
	rdb := redis.NewClient(goredis.ClientOptions(addr))
	node, err := goredis.New(rdb)
	return node, rdb.Close, err
}

// cluster builds a node over one Redis Cluster, as a user would.
func cluster(addrs []string) (core.Node, func() error, error) {
	rdb := redis.NewClusterClient(goredis.ClusterOptions(addrs...))
	node, err := goredis.New(rdb)
	return node, rdb.Close, err
}

// TestConformance runs the suite over single servers with the full
// strategy × size matrix: the one real driver on which the project checks
// the strategies and core over real servers (memory is the other); the
// other drivers, and the clusters, run the driver scope (conformance's
// package doc, Scope).
func TestConformance(t *testing.T) {
	t.Run("goredis/single", func(t *testing.T) {
		conformance.Run(t, redistest.Harness(single), conformance.WithFullMatrix())
	})
	t.Run("goredis/cluster", func(t *testing.T) {
		conformance.Run(t, redistest.ClusterHarness(cluster), conformance.WithSizes(1, 3))
	})
}
