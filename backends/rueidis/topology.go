package rueidis

import (
	"fmt"
	"reflect"

	"github.com/redis/rueidis"

	"github.com/quorumlock/quorumlock/core/driver"
)

// oneNodeAdvice is what to build instead of a client that is not one
// Redlock node.
const oneNodeAdvice = "give each independent master (not its replicas) as its own node: a client of one master, " +
	"rueidis.NewClient(qlrueidis.ClientOption(addr)), or one cluster client for a Redis Cluster, " +
	"rueidis.NewClient(qlrueidis.ClientOption(addrs...))"

// refuseTopology returns an error for a client that is not one Redlock
// node: one whose keys can move to another server over time, or whose
// acknowledged writes can be lost without a restart. rueidis keeps a
// client's options to itself, so a client is judged by its Mode, its
// Nodes and its type.
func refuseTopology(client Client, name string) error {
	switch full, _ := client.(rueidis.Client); {
	case client.Mode() == rueidis.ClientModeSentinel:
		return driver.NotOneNode("rueidis", name, "is a Sentinel client (ClientOption.Sentinel), which "+driver.FailsOver, oneNodeAdvice)
	case client.Mode() != rueidis.ClientModeStandalone:
	case isPrimaryWithReplicas(client):
		return driver.NotOneNode("rueidis", name, "was made with Standalone.ReplicaAddress or Standalone.EnableRedirect, so it sends commands "+
			"to other servers than its primary: to a replica when its SendToReplicas says so, which a node cannot check, "+
			"or to whichever server a REDIRECT reply names after a failover, which may lack a lock the old primary acknowledged; "+driver.KeyMoves, oneNodeAdvice)
	case full != nil && len(full.Nodes()) > 1:
		return driver.NotOneNode("rueidis", name, fmt.Sprintf("reaches %d servers in standalone mode, a primary and the replicas of Standalone.ReplicaAddress, "+
			"and sends a replica what its SendToReplicas picks, which a node cannot check: %s", len(full.Nodes()), driver.KeyMoves), oneNodeAdvice)
	}
	return nil
}

// isPrimaryWithReplicas reports whether client is rueidis's own client of
// a primary with replicas (Standalone.ReplicaAddress) or with redirects
// (Standalone.EnableRedirect), a type rueidis does not export. Its Mode
// is standalone, as a client of one server's is.
func isPrimaryWithReplicas(client Client) bool {
	t := reflect.TypeOf(client)
	return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "github.com/redis/rueidis" && t.Elem().Name() == "standalone"
}

// clusterAdvice is what a user who gave a Redis Cluster member to a
// client of one server should build instead.
const clusterAdvice = "build one node over the whole cluster from a client made with qlrueidis.ClientOption(addrs...) " +
	"and without ForceSingleClient, which rueidis then makes a cluster client"

// explain drops the error of a nil reply (rueidis.Nil), and turns a Redis
// Cluster reply (MOVED, ASK, CROSSSLOT) that reaches a node over a client
// of one server (one made with ForceSingleClient) into an error that says
// what is wrong: the server is a cluster member, given where an
// independent master was expected (see driver.ExplainCluster). A cluster
// client follows redirections itself, so one that comes back through it
// is the cluster's own, left as it is.
func (n *Node) explain(err error) error {
	if rueidis.IsRedisNil(err) {
		return nil
	}
	return n.common.Explain(err, clusterAdvice)
}
