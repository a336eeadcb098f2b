package goredis

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/core"
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
		return fmt.Errorf("%w: goredis: client %s is a *redis.Ring, which moves a key to another shard when one misses heartbeats, "+
			"so one lock key can live on two servers over time: two holders; %s", core.ErrInvalidArgument, name, oneNodeAdvice)
	case singleClient:
		if cl.Options().Addr == failoverAddr {
			return fmt.Errorf("%w: goredis: a Sentinel failover client (redis.NewFailoverClient, or redis.NewUniversalClient with MasterName) "+
				"moves to a promoted replica when its master fails; replication is asynchronous, so the replica may lack a lock "+
				"the master acknowledged, and the restart guard cannot tell (the replica has the birth key): two holders; %s",
				core.ErrInvalidArgument, oneNodeAdvice)
		}
	case clusterClient:
		if cl.Options().ClusterSlots != nil {
			return fmt.Errorf("%w: goredis: a *redis.ClusterClient whose slot map comes from ClusterSlots "+
				"(redis.NewFailoverClusterClient, or redis.NewUniversalClient with MasterName and RouteByLatency, RouteRandomly or IsClusterMode, "+
				"builds it from Sentinel): its servers are not a Redis Cluster and do not check that map, so when it changes "+
				"(a failover, another list of servers) one lock key can live on two servers over time: two holders; %s",
				core.ErrInvalidArgument, oneNodeAdvice)
		}
	}
	return nil
}
