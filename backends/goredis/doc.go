// Package goredis is the quorumlock backend for go-redis v9
// (github.com/redis/go-redis/v9).
//
//	rdb := redis.NewClient(goredis.ClientOptions("10.0.0.1:6379"))
//	node, err := goredis.New(rdb)
//
// # Accepted clients
//
// New takes any client with Process, Eval and EvalSha: *redis.Client (a
// single node, or a failover client from redis.NewFailoverClient),
// *redis.ClusterClient, *redis.Ring, or a redis.UniversalClient. Each client
// is one Redlock node: for N independent masters, make N clients and N nodes.
//
// The client must have ContextTimeoutEnabled: without it go-redis ignores
// context deadlines on the socket, and the Locker's node timeout cannot
// bound a call to a node that does not answer. New refuses such a client
// unless given AllowUnboundedCalls.
//
// go-redis's defaults retry a failed command three times and a failed dial
// five times, with backoff, all inside the Locker's node timeout: a node that
// is down then costs a whole node timeout instead of failing at once.
// ClientOptions returns options with those retries off, as a lock node wants
// them (core retries whole rounds); a client built otherwise still works.
//
// The node never closes the client: it belongs to the caller.
//
// # Commands and errors
//
// Acquire is SET key value PX ttl NX through Process; the scripts go through
// EvalSha and Eval. A nil reply becomes a plain result. Errors are returned
// as go-redis made them: a NOSCRIPT reply is classified core.KindNoScript,
// context errors core.KindContext, and every other error (connection
// refused, I/O timeout, redis.ErrClosed, server errors) core.KindNodeFailure.
// The node never retries; go-redis's own retries (MaxRetries) still apply,
// and core's release of every node after a failed round covers a retried SET
// whose first reply was lost.
//
// # Redis Cluster
//
// A *redis.ClusterClient is one node whose keys are spread over the
// cluster's masters by hash slot; every command of one lock touches one key,
// so each goes to one master. A cluster is one Redlock node, not N: its
// masters are not independent voters, and a failover can lose a lock that
// was not yet replicated. For Redlock across clusters, give the Locker
// several cluster clients. ClusterOptions gives a cluster client the
// settings of ClientOptions.
//
// # Compliance
//
// *Node implements core.Node and the optional capabilities core.Batcher
// (EvalBatch sends a batch of script calls in one go-redis pipeline, one
// round trip; a client without Pipeline gets them one by one) and
// core.Watcher (Watch subscribes to a release channel on a PubSub
// connection of its own, and stop closes it; a client without Subscribe
// makes Watch fail with errors.ErrUnsupported, and core then polls).
package goredis
