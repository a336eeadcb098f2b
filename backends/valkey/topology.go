// Code generated from backends/rueidis by internal/generate (go generate); DO NOT EDIT.

package valkey

import (
	"fmt"
	"reflect"

	"github.com/valkey-io/valkey-go"

	"github.com/quorumlock/quorumlock/core/driver"
)

// oneNodeAdvice is what to build instead of a client that is not one
// Redlock node.
const oneNodeAdvice = "give each independent master (not its replicas) as its own node: a client of one master, " +
	"valkey.NewClient(qlvalkey.ClientOption(addr)), or one cluster client for a Redis Cluster, " +
	"valkey.NewClient(qlvalkey.ClientOption(addrs...))"

// refuseTopology returns an error for a client that is not one Redlock
// node: one whose keys can move to another server over time, or whose
// acknowledged writes can be lost without a restart. valkey keeps a
// client's options to itself, so a client is judged by its Mode, its
// Nodes and its type.
func refuseTopology(client Client, name string) error {
	switch full, _ := client.(valkey.Client); {
	case client.Mode() == valkey.ClientModeSentinel:
		return driver.NotOneNode("valkey", name, "is a Sentinel client (ClientOption.Sentinel), which "+driver.FailsOver, oneNodeAdvice)
	case client.Mode() != valkey.ClientModeStandalone:
	case isPrimaryWithReplicas(client):
		return driver.NotOneNode("valkey", name, "was made with Standalone.ReplicaAddress or Standalone.EnableRedirect, so it sends commands "+
			"to other servers than its primary: to a replica when its SendToReplicas says so, which a node cannot check, "+
			"or to whichever server a REDIRECT reply names after a failover, which may lack a lock the old primary acknowledged; "+driver.KeyMoves, oneNodeAdvice)
	case full != nil && len(full.Nodes()) > 1:
		return driver.NotOneNode("valkey", name, fmt.Sprintf("reaches %d servers in standalone mode, a primary and the replicas of Standalone.ReplicaAddress, "+
			"and sends a replica what its SendToReplicas picks, which a node cannot check: %s", len(full.Nodes()), driver.KeyMoves), oneNodeAdvice)
	}
	return nil
}

// isPrimaryWithReplicas reports whether client is valkey's own client of
// a primary with replicas (Standalone.ReplicaAddress) or with redirects
// (Standalone.EnableRedirect), a type valkey does not export. Its Mode
// is standalone, as a client of one server's is.
func isPrimaryWithReplicas(client Client) bool {
	t := reflect.TypeOf(client)
	return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "github.com/valkey-io/valkey-go" && t.Elem().Name() == "standalone"
}

// clusterAdvice is what a user who gave a Redis Cluster member to a
// client of one server should build instead.
const clusterAdvice = "build one node over the whole cluster from a client made with qlvalkey.ClientOption(addrs...) " +
	"and without ForceSingleClient, which valkey then makes a cluster client"

// explain drops the error of a nil reply (valkey.Nil), and turns a Redis
// Cluster reply (MOVED, ASK, CROSSSLOT) that reaches a node over a client
// of one server (one made with ForceSingleClient) into an error that says
// what is wrong: the server is a cluster member, given where an
// independent master was expected (see driver.ExplainCluster). A cluster
// client follows redirections itself, so one that comes back through it
// is the cluster's own, left as it is.
func (n *Node) explain(err error) error {
	if valkey.IsValkeyNil(err) {
		return nil
	}
	return n.common.Explain(err, clusterAdvice)
}
