package goredis

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// The go-redis client types, told apart by their Options method, which a
// type that embeds one of them promotes: *redis.Client (single server or
// Sentinel failover), *redis.ClusterClient and *redis.Ring.
type (
	singleClient  interface{ Options() *redis.Options }
	clusterClient interface{ Options() *redis.ClusterOptions }
	ringClient    interface{ Options() *redis.RingOptions }
)

// failoverAddr is the Addr that go-redis gives the options of a Sentinel
// failover client (redis.NewFailoverClient): its connections go to
// whichever server Sentinel names as the master when they are dialled.
const failoverAddr = "FailoverClient"

// oneNodeAdvice is what to build instead of a client that is not one
// Redlock node.
const oneNodeAdvice = "give each independent master (not its replicas) as its own node: one *redis.Client per master, " +
	"goredis.New(redis.NewClient(goredis.ClientOptions(addr))), or one *redis.ClusterClient for a Redis Cluster, " +
	"goredis.New(redis.NewClusterClient(goredis.ClusterOptions(addrs...)))"

// refuseTopology returns an error for a client that is not one Redlock
// node: one whose keys can move to another server over time, or whose
// acknowledged writes can be lost without a restart.
func refuseTopology(client Client, name string) error {
	switch cl := client.(type) {
	case ringClient:
		return driver.NotOneNode("goredis", name, "is a *redis.Ring, which moves a key to another shard when one misses heartbeats, so "+driver.KeyMoves,
			oneNodeAdvice)
	case singleClient:
		if cl.Options().Addr == failoverAddr {
			return fmt.Errorf("%w: goredis: a Sentinel failover client (redis.NewFailoverClient, or redis.NewUniversalClient with MasterName) %s; %s",
				core.ErrInvalidArgument, driver.FailsOver, oneNodeAdvice)
		}
	case clusterClient:
		if cl.Options().ClusterSlots != nil {
			return fmt.Errorf("%w: goredis: a *redis.ClusterClient whose slot map comes from ClusterSlots "+
				"(redis.NewFailoverClusterClient, or redis.NewUniversalClient with MasterName and RouteByLatency, RouteRandomly or IsClusterMode, "+
				"builds it from Sentinel): its servers are not a Redis Cluster and do not check that map, so when it changes "+
				"(a failover, another list of servers) %s; %s", core.ErrInvalidArgument, driver.KeyMoves, oneNodeAdvice)
		}
	}
	return nil
}

// clusterAdvice is what a user who gave a Redis Cluster member to a
// client of one server should build instead.
const clusterAdvice = "build one node over the whole cluster, goredis.New(redis.NewClusterClient(goredis.ClusterOptions(addrs...)))"

// explain drops the error of a nil reply (redis.Nil), and turns a Redis
// Cluster reply (MOVED, ASK, CROSSSLOT) that reaches a node over a client
// of one server into an error that says what is wrong: the server is a
// cluster member, given where an independent master was expected (see
// driver.ExplainCluster). A *redis.ClusterClient follows redirections
// itself, so one that comes back through it is the cluster's own, left as
// it is.
func (n *Node) explain(err error) error {
	switch _, cluster := n.client.(*redis.ClusterClient); {
	case errors.Is(err, redis.Nil):
		return nil
	case cluster:
		return err
	}
	return driver.ExplainCluster(err, clusterAdvice)
}
