// Package rueidis is the quorumlock backend for rueidis
// (github.com/redis/rueidis).
//
// Its name is the driver's, so import it under another one; qlrueidis is
// the one these docs use:
//
//	import (
//		"github.com/redis/rueidis"
//		qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
//	)
//
// Dial is the way to start: it makes one client and node per address (one
// per independent master), each owning its client, so that the Locker's
// Close closes them all:
//
//	nodes, closeAll, err := qlrueidis.Dial([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
//		qlrueidis.WithCredentials("", password))
//	if err != nil { ... }
//	locker, err := core.New(nodes)
//	if err != nil { closeAll(); ... }
//	defer locker.Close()
//
// rueidis connects when a client is made; Dial makes the clients in
// parallel and does not wait for a server that is hung (see Dial), so a
// minority of servers down or hung does not hold a program's start. Its
// options set credentials, TLS, a Redis Cluster (WithCluster(true)) and
// any other rueidis setting (WithClientOption), keeping those a lock node
// needs. For a client of your own, New makes a node around it, which
// leaves the client to you unless given WithCloseClient(true):
//
//	client, err := rueidis.NewClient(qlrueidis.ClientOption("10.0.0.1:6379"))
//	node, err := qlrueidis.New(client)
//
// # Accepted clients
//
// New takes any rueidis.Client (or anything with its B, Do and Mode
// methods): a client of one server, or of a Redis Cluster, which rueidis
// detects from the address. Each client is one Redlock node: for N
// independent masters, make N clients and N nodes.
//
// New refuses, with an error matching core.ErrInvalidArgument, the clients
// that are not one Redlock node, because a key they write can move to
// another server over time, or a write the server acknowledged can vanish
// without a restart:
//
//   - a Sentinel client (ClientOption.Sentinel; Mode sentinel): after a
//     failover it writes to a promoted replica, which may lack a lock the
//     old master acknowledged (replication is asynchronous), and which the
//     restart guard takes for the same server, since it has the birth key;
//   - a client of a primary with replicas (Standalone.ReplicaAddress),
//     which sends a replica whatever its SendToReplicas picks, a choice a
//     node cannot check; or with redirects (Standalone.EnableRedirect,
//     Valkey 8), which follows a REDIRECT reply to whichever server is
//     primary after a failover. rueidis reports Mode standalone for these,
//     as for a client of one server: New knows them by their type, or,
//     inside a wrapper, by the servers Nodes lists.
//
// rueidis never moves a client of one server to another address: several
// standalone addresses make NewClient fail (it takes them for a cluster's)
// unless ForceSingleClient is set, and the client then talks to the first
// for its whole life. A cluster client's ReplicaOnly and SendToReplicas
// cannot be seen from outside; a cluster replica redirects a write command
// to its master, and a script's writes fail on a read-only replica, so the
// lock's keys stay on the slot's master. New cannot see a DialCtxFn that
// picks among servers, an address whose DNS name follows a failover, or a
// client with redirects inside a wrapper: give it a client of one server
// or of one Redis Cluster.
//
// ClientOption returns options suited to a lock node: no client-side
// caching (no CLIENT TRACKING, which managed services refuse; the protocol
// never reads through the cache), no command retries, every call through
// the pipelining queue (so cancellation is honoured), one connection per
// server (so a clean-up release never overtakes the SET it undoes), and
// connection timeouts of seconds. A client built otherwise works, but see
// ClientOption for what each setting prevents.
//
// # Why it is fast
//
// Commands are built with rueidis's typed builder (no argument boxing) and
// sent with Do: concurrent calls from many goroutines are pipelined on one
// connection by rueidis's auto-pipelining, so a Locker under load needs
// neither a connection pool nor one round trip per caller. rueidis honours
// the context of each call: a node that does not answer returns when the
// Locker's node timeout ends.
//
// # Commands and errors
//
// Acquire is SET key value NX PX ttl; the scripts go through EVALSHA and
// EVAL as plain commands. rueidis's own Lua helper falls back from EVALSHA
// to EVAL by itself; the protocol needs that decision in core, which
// remembers per node which scripts it has, so this backend does not use it.
// A nil reply, and Lua false (RESP3 false), become a plain nil result. A
// NOSCRIPT reply is classified driver.KindNoScript, context errors
// driver.KindContext, and everything else (rueidis.ErrClosing, connection
// errors, server errors) driver.KindNodeFailure. The node never retries.
//
// # Redis Cluster
//
// A cluster client is one node: each command goes to the master of its
// key's slot. A cluster is one Redlock node, not N: its masters are not
// independent voters, and a failover can lose a lock that was not yet
// replicated, as a restart without persistence would on a server of its
// own; the restart guard does not watch a cluster (Sharded). For Redlock
// across clusters, give the Locker several cluster clients: with three or
// more, one such loss leaves a quorum. The protocol's keys for one lock share a slot; on a cluster the
// node refuses a script call whose keys do not (with an error wrapping
// core.ErrInvalidArgument), where rueidis's builder would panic.
//
// Scripts are cached per master: the first script call that reaches a
// master which has not seen the script costs one NOSCRIPT round trip there.
//
// The node never closes the client: it belongs to the caller, unless the
// node was made with WithCloseClient(true), as Dial makes its nodes. A
// rueidis cluster client (v1.0.79) does not stay closed: closing its
// connections starts a topology refresh that connects again about a second
// later, with goroutines that outlive Close by up to six seconds. A node
// made with WithCloseClient(true) refuses calls once closed, whatever the
// client does.
//
// # Compliance
//
// *Node implements core.Node and the optional capabilities driver.Batcher
// (EvalBatch sends a batch of script calls with one DoMulti, one round
// trip; a client without DoMulti gets them one by one) and driver.Watcher
// (Watch subscribes to a release channel with rueidis's Receive, on the
// client's pipelined connection, and stop unsubscribes once the node's
// last watch of the channel ends; a client without Receive makes Watch
// fail with errors.ErrUnsupported, and core then polls).
package rueidis
