// Package goredis is the quorumlock backend for go-redis v9
// (github.com/redis/go-redis/v9).
//
// Dial is the way to start: it makes one client and node per address (one
// per independent master), each node owning its client, so that the
// Locker's Close closes them all:
//
//	nodes, closeAll, err := goredis.Dial([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
//		goredis.WithCredentials("", password))
//	if err != nil { ... }
//	locker, err := core.New(nodes)
//	if err != nil { closeAll(); ... }
//	defer locker.Close()
//
// Its options set credentials, TLS, a Redis Cluster (WithCluster(true))
// and any other go-redis setting (WithOptions), keeping those a lock node
// needs.
// For a client of your own, New makes a node around it, which leaves the
// client to you:
//
//	rdb := redis.NewClient(goredis.ClientOptions("10.0.0.1:6379"))
//	node, err := goredis.New(rdb)
//
// # Accepted clients
//
// Each client is one Redlock node: for N independent masters, make N
// clients and N nodes. New takes any client with Process, Eval and
// EvalSha, and accepts:
//
//   - a *redis.Client of one server (redis.NewClient, or
//     redis.NewUniversalClient with one address);
//   - a *redis.ClusterClient over a Redis Cluster (redis.NewClusterClient,
//     or redis.NewUniversalClient with several addresses), ReadOnly,
//     RouteByLatency and RouteRandomly included: they send replicas only
//     the commands Redis flags read-only, and the lock's SET, EVAL and
//     EVALSHA go to the slot's master (see Redis Cluster below).
//
// New refuses, with an error matching core.ErrInvalidArgument, the clients
// that are not one Redlock node, because a key they write can move to
// another server over time, or a write the server acknowledged can vanish
// without a restart:
//
//   - a *redis.Ring: it takes a shard that misses heartbeats (stalled, or
//     cut off) out of the ring and rehashes its keys onto the others, so a
//     second client wins a lock the first still holds on that shard;
//   - a Sentinel failover client (redis.NewFailoverClient, or
//     redis.NewUniversalClient with MasterName): after a failover it writes
//     to a promoted replica, which may lack a lock the old master
//     acknowledged (replication is asynchronous), and which the restart
//     guard takes for the same server, since it has the birth key;
//   - a *redis.ClusterClient whose slot map comes from ClusterSlots
//     (redis.NewFailoverClusterClient builds one from Sentinel): its
//     servers are not a Redis Cluster and do not check that map.
//
// Client types are recognised by their Options method, which a type of the
// caller's that embeds one promotes. A client without it cannot be told
// apart and counts as one server: a *redis.Conn or an AutoPipeliner taken
// from a refused client, or a wrapper that hides the client. Nor can New
// see a Dialer that picks among servers, or an address whose DNS name
// follows a failover (a managed service's primary endpoint). Give New a
// client of one server or of one Redis Cluster.
//
// The client must have ContextTimeoutEnabled: without it go-redis ignores
// context deadlines on the socket, and the Locker's node timeout cannot
// bound a call to a node that does not answer. New refuses such a client
// unless given WithUnboundedCalls(true).
//
// go-redis's defaults retry a failed command three times and a failed dial
// five times, with backoff, all inside the Locker's node timeout: a node that
// is down then costs a whole node timeout instead of failing at once.
// ClientOptions returns options with those retries off, as a lock node wants
// them (core retries whole rounds); a client built otherwise still works.
//
// A node made by New never closes the client: it belongs to the caller.
// A node made by Dial closes the client Dial made for it.
//
// # Logs of a server that is down
//
// While a server is down, go-redis logs each failed connection attempt
// through its own logger, by default to stderr:
//
//	redis: 2025/06/01 12:00:00 pool.go:770: redis: connection pool: failed to dial after 1 attempts: dial tcp 10.0.0.3:6379: connect: connection refused
//
// With a minority of the nodes down this is expected: the Locker works on
// a quorum, and the node's errors reach core's observers and QuorumError
// anyway. The logger is go-redis's, one for the whole process. To quiet
// it, give redis.SetLogger a logger that discards: of package
// github.com/redis/go-redis/v9/logging, &logging.VoidLogger{} drops every
// line (logging.Disable sets it), and
// logging.NewBlacklistLogger([]string{"failed to dial"}) these lines
// alone. Or forward go-redis's lines to slog at debug level; any value
// with go-redis's Printf method is a logger:
//
//	type redisLog struct{ l *slog.Logger }
//
//	func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
//		r.l.DebugContext(ctx, fmt.Sprintf(format, v...))
//	}
//
//	redis.SetLogger(redisLog{slog.Default()})
//
// # Commands and errors
//
// Acquire is SET key value PX ttl NX through Process; the scripts go through
// EvalSha and Eval. A nil reply becomes a plain result. Errors are returned
// as go-redis made them: a NOSCRIPT reply is classified driver.KindNoScript,
// context errors driver.KindContext, and every other error (connection
// refused, I/O timeout, redis.ErrClosed, server errors) driver.KindNodeFailure.
// The node never retries; go-redis's own retries (MaxRetries) still apply,
// and core's release of every node after a failed round covers a retried SET
// whose first reply was lost.
//
// # Redis Cluster
//
// A *redis.ClusterClient is one node whose keys are spread over the
// cluster's masters by hash slot; every command of one lock touches one key,
// so each goes to one master, and a master refuses the keys of slots it
// does not own. A cluster is one Redlock node, not N: its masters are not
// independent voters, and a failover can lose a lock that was not yet
// replicated, as a restart without persistence would on a server of its
// own; the restart guard does not watch a cluster (Sharded). For Redlock
// across clusters, give the Locker several cluster clients: with three or
// more, one such loss leaves a quorum. ClusterOptions gives a cluster
// client the settings of ClientOptions.
//
// # Compliance
//
// *Node implements core.Node and the optional capabilities driver.Batcher
// (EvalBatch sends a batch of script calls in one go-redis pipeline, one
// round trip; a client without Pipeline gets them one by one) and
// driver.Watcher (Watch subscribes to a release channel on a PubSub
// connection of its own, and stop closes it; a client without Subscribe
// makes Watch fail with errors.ErrUnsupported, and core then polls).
package goredis
