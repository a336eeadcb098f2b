package rueidis

import (
	"fmt"
	"reflect"

	"github.com/redis/rueidis"

	"github.com/quorumlock/quorumlock/core"
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
	switch client.Mode() {
	case rueidis.ClientModeSentinel:
		return fmt.Errorf("%w: rueidis: client %s is a Sentinel client (ClientOption.Sentinel), which moves to a promoted replica "+
			"when its master fails; replication is asynchronous, so the replica may lack a lock the master acknowledged, "+
			"and the restart guard cannot tell (the replica has the birth key): two holders; %s",
			core.ErrInvalidArgument, name, oneNodeAdvice)
	case rueidis.ClientModeStandalone:
		if isPrimaryWithReplicas(client) {
			return fmt.Errorf("%w: rueidis: client %s was made with Standalone.ReplicaAddress or Standalone.EnableRedirect, "+
				"so it sends commands to other servers than its primary: to a replica when its SendToReplicas says so, "+
				"which a node cannot check, or to whichever server a REDIRECT reply names after a failover, "+
				"which may lack a lock the old primary acknowledged; one lock key can live on two servers over time: two holders; %s",
				core.ErrInvalidArgument, name, oneNodeAdvice)
		}
		if full, ok := client.(rueidis.Client); ok && len(full.Nodes()) > 1 {
			return fmt.Errorf("%w: rueidis: client %s reaches %d servers in standalone mode, a primary and the replicas of "+
				"Standalone.ReplicaAddress, and sends a replica what its SendToReplicas picks, which a node cannot check: "+
				"one lock key can live on two servers over time: two holders; %s",
				core.ErrInvalidArgument, name, len(full.Nodes()), oneNodeAdvice)
		}
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
