package conformance_test

import (
	"testing"
	"time"

	goredislib "github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

func TestMain(m *testing.M) { redistest.Main(m) }

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
	client, err := rueidislib.NewClient(rueidis.ClientOption(addr))
	if err != nil {
		return nil, nil, err
	}
	node, err := rueidis.New(client)
	return node, func() error { client.Close(); return nil }, err
}

// rueidisClusterGrace is how long a closed rueidis cluster client's
// goroutines may run on (v1.0.79): a last topology refresh after up to a
// second, whose replaced connections are closed five seconds later.
const rueidisClusterGrace = 10 * time.Second

func rueidisCluster(addrs []string) (core.Node, func() error, error) {
	client, err := rueidislib.NewClient(rueidis.ClientOption(addrs...))
	if err != nil {
		return nil, nil, err
	}
	node, err := rueidis.New(client, rueidis.WithCloseClient(true))
	return node, node.Close, err
}

// TestCrossDriver: a lock taken through any driver is held, extended and
// released correctly through each of the others, on the same servers.
func TestCrossDriver(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		conformance.RunCrossDriver(t, redistest.Harness(goredisSingle), []conformance.Driver{
			redistest.Driver("goredis", goredisSingle),
			redistest.Driver("redigo", redigoSingle),
			redistest.Driver("rueidis", rueidisSingle),
		})
	})
	t.Run("cluster", func(t *testing.T) {
		conformance.RunCrossDriver(t, redistest.ClusterHarness(goredisCluster), []conformance.Driver{
			redistest.ClusterDriver("goredis", goredisCluster),
			redistest.ClusterDriver("rueidis", rueidisCluster),
		}, conformance.WithLeakGrace(rueidisClusterGrace))
	})
}

// TestMixedTopology: a Locker whose nodes are of different drivers (server
// 0 through go-redis, 1 through redigo, 2 through rueidis, and so on) keeps
// every locker property.
func TestMixedTopology(t *testing.T) {
	t.Run("goredis+redigo+rueidis", func(t *testing.T) {
		conformance.Run(t, redistest.MixedHarness(goredisSingle, redigoSingle, rueidisSingle),
			conformance.WithSizes(3, 5))
	})
}
