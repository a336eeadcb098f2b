package rueidis

import "github.com/quorumlock/quorumlock/core/driver"

// clusterAdvice is what a user who gave a Redis Cluster member to a
// client of one server should build instead.
const clusterAdvice = "build one node over the whole cluster from a client made with qlrueidis.ClientOption(addrs...) " +
	"and without ForceSingleClient, which rueidis then makes a cluster client"

// explain turns a Redis Cluster reply (MOVED, ASK, CROSSSLOT) that
// reaches a node over a client of one server (one made with
// ForceSingleClient) into an error that says what is wrong: the server is
// a cluster member, given where an independent master was expected (see
// driver.ExplainCluster). A cluster client follows redirections itself,
// so one that comes back through it is the cluster's own, left as it is.
func (n *Node) explain(err error) error {
	if err == nil || n.cluster {
		return err
	}
	return driver.ExplainCluster(err, clusterAdvice)
}
