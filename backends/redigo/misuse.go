package redigo

import "github.com/quorumlock/quorumlock/core/driver"

// clusterAdvice is what a user who gave a Redis Cluster member to a redigo
// pool should build instead.
const clusterAdvice = "redigo has no cluster client; build one node over the whole cluster with backends/goredis or backends/rueidis"

// explain turns a Redis Cluster reply (MOVED, ASK, CROSSSLOT) into an
// error that says what is wrong: the pool's server is a cluster member,
// given where an independent master was expected (see
// driver.ExplainCluster). A redigo pool always talks to one server.
// It is called on every reply: a nil err costs a comparison, inlined.
func (n *Node) explain(err error) error {
	if err == nil {
		return nil
	}
	return driver.ExplainCluster(err, clusterAdvice)
}
