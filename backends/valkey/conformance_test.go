package valkey_test

import (
	"testing"
	"time"

	goredislib "github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/backends/redigo"
	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// single builds a valkey node for one server, as a user would.
func single(addr string) (core.Node, func() error, error) {
	client, err := valkey.NewClient(qlvalkey.ClientOption(addr))
	if err != nil {
		return nil, nil, err
	}
	node, err := qlvalkey.New(client)
	return node, func() error { client.Close(); return nil }, err
}

// cluster builds a valkey node for a Redis Cluster, as a user would. The
// node owns the client (WithCloseClient(true)): a call right after a
// valkey-go cluster client's Close can still reach the cluster, which the
// suite's closed-client check would take for a node that ignores Close.
func cluster(addrs []string) (core.Node, func() error, error) {
	client, err := valkey.NewClient(qlvalkey.ClientOption(addrs...))
	if err != nil {
		return nil, nil, err
	}
	node, err := qlvalkey.New(client, qlvalkey.WithCloseClient(true))
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return node, node.Close, nil
}

// clusterGrace is how long a closed valkey-go (or rueidis) cluster
// client's goroutines may run on: rueidis v1.0.79's refresh a topology
// once more after up to a second, and close the connections it replaced
// five seconds later, and valkey-go, its fork, may do the same.
const clusterGrace = 10 * time.Second

func TestConformance(t *testing.T) {
	t.Run("valkey/single", func(t *testing.T) {
		conformance.Run(t, redistest.Harness(single))
	})
	t.Run("valkey/cluster", func(t *testing.T) {
		conformance.Run(t, redistest.ClusterHarness(cluster), conformance.WithSizes(1, 3), conformance.WithLeakGrace(clusterGrace))
	})
}

func goredisSingle(addr string) (core.Node, func() error, error) {
	rdb := goredislib.NewClient(goredis.ClientOptions(addr))
	node, err := goredis.New(rdb)
	return node, rdb.Close, err
}

func goredisCluster(addrs []string) (core.Node, func() error, error) {
	rdb := goredislib.NewClusterClient(goredis.ClusterOptions(addrs...))
	node, err := goredis.New(rdb)
	return node, rdb.Close, err
}

func redigoSingle(addr string) (core.Node, func() error, error) {
	pool := redigo.NewPool(addr)
	node, err := redigo.New(pool, redigo.WithName(addr))
	return node, pool.Close, err
}

func rueidisSingle(addr string) (core.Node, func() error, error) {
	client, err := rueidislib.NewClient(qlrueidis.ClientOption(addr))
	if err != nil {
		return nil, nil, err
	}
	node, err := qlrueidis.New(client)
	return node, func() error { client.Close(); return nil }, err
}

func rueidisCluster(addrs []string) (core.Node, func() error, error) {
	client, err := rueidislib.NewClient(qlrueidis.ClientOption(addrs...))
	if err != nil {
		return nil, nil, err
	}
	node, err := qlrueidis.New(client, qlrueidis.WithCloseClient(true))
	return node, node.Close, err
}

// TestCrossDriver: a lock taken through valkey-go is held, extended and
// released correctly through each of the other drivers, and the other
// way round, on the same servers.
func TestCrossDriver(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		conformance.RunCrossDriver(t, redistest.Harness(single), []conformance.Driver{
			redistest.Driver("valkey", single),
			redistest.Driver("goredis", goredisSingle),
			redistest.Driver("redigo", redigoSingle),
			redistest.Driver("rueidis", rueidisSingle),
		})
	})
	t.Run("cluster", func(t *testing.T) {
		conformance.RunCrossDriver(t, redistest.ClusterHarness(cluster), []conformance.Driver{
			redistest.ClusterDriver("valkey", cluster),
			redistest.ClusterDriver("goredis", goredisCluster),
			redistest.ClusterDriver("rueidis", rueidisCluster),
		}, conformance.WithLeakGrace(clusterGrace))
	})
}

// TestMixedTopology: a Locker whose nodes are of different drivers keeps
// every locker property.
func TestMixedTopology(t *testing.T) {
	conformance.Run(t, redistest.MixedHarness(single, goredisSingle, rueidisSingle), conformance.WithSizes(3))
}
