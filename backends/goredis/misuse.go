package goredis

import (
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/core/driver"
)

// clusterAdvice is what a user who gave a Redis Cluster member to a
// client of one server should build instead.
const clusterAdvice = "build one node over the whole cluster, goredis.New(redis.NewClusterClient(goredis.ClusterOptions(addrs...)))"

// explain turns a Redis Cluster reply (MOVED, ASK, CROSSSLOT) that
// reaches a node over a client of one server into an error that says what
// is wrong: the server is a cluster member, given where an independent
// master was expected (see driver.ExplainCluster). A *redis.ClusterClient
// follows redirections itself, so one that comes back through it is the
// cluster's own, left as it is.
func (n *Node) explain(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := n.client.(*redis.ClusterClient); ok {
		return err
	}
	return driver.ExplainCluster(err, clusterAdvice)
}
