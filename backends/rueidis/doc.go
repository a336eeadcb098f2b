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
//	client, err := rueidis.NewClient(qlrueidis.ClientOption("10.0.0.1:6379"))
//	node, err := qlrueidis.New(client)
//
// # Accepted clients
//
// New takes any rueidis.Client (or anything with its B, Do and Mode
// methods): a single master, a sentinel-managed master, or a Redis
// Cluster, which rueidis detects from the address. Each client is one
// Redlock node: for N independent masters, make N clients and N nodes.
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
// NOSCRIPT reply is classified core.KindNoScript, context errors
// core.KindContext, and everything else (rueidis.ErrClosing, connection
// errors, server errors) core.KindNodeFailure. The node never retries.
//
// # Redis Cluster
//
// A cluster client is one node: each command goes to the master of its
// key's slot. A cluster is one Redlock node, not N: its masters are not
// independent voters, and a failover can lose a lock that was not yet
// replicated. For Redlock across clusters, give the Locker several cluster
// clients. The protocol's keys for one lock share a slot; on a cluster the
// node refuses a script call whose keys do not (with an error wrapping
// core.ErrInvalidArgument), where rueidis's builder would panic.
//
// Scripts are cached per master: the first script call that reaches a
// master which has not seen the script costs one NOSCRIPT round trip there.
//
// The node never closes the client: it belongs to the caller, unless the
// node was made with CloseClient. A rueidis cluster client (v1.0.79) does
// not stay closed: closing its connections starts a topology refresh that
// connects again about a second later, with goroutines that outlive Close
// by up to six seconds. A node made with CloseClient refuses calls once
// closed, whatever the client does.
//
// # Compliance
//
// *Node implements core.Node and the optional capabilities core.Batcher
// (EvalBatch sends a batch of script calls with one DoMulti, one round
// trip; a client without DoMulti gets them one by one) and core.Watcher
// (Watch subscribes to a release channel with rueidis's Receive, on the
// client's pipelined connection, and stop unsubscribes once the node's
// last watch of the channel ends; a client without Receive makes Watch
// fail with errors.ErrUnsupported, and core then polls).
package rueidis
