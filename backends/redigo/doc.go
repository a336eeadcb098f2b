// Package redigo is the quorumlock backend for redigo
// (github.com/gomodule/redigo).
//
// Dial is the way to start: it makes one pool and node per address (one
// per independent master), each named by its address and owning its
// pool, so that the Locker's Close closes them all:
//
//	nodes, closeAll, err := redigo.Dial([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
//		redigo.WithCredentials("", password))
//	if err != nil { ... }
//	locker, err := core.New(nodes)
//	if err != nil { closeAll(); ... }
//	defer locker.Close()
//
// Its options set credentials, TLS (with a handshake bounded by the node
// timeout, which redigo's own DialUseTLS is not), dial options and pool
// settings. For a pool of your own, New makes a node around it, which
// leaves the pool to you:
//
//	pool := redigo.NewPool("10.0.0.1:6379")
//	defer pool.Close()
//	node, err := redigo.New(pool, redigo.WithName("10.0.0.1:6379"))
//
// # Accepted clients
//
// New takes a Pool: anything with GetContext, which *redis.Pool has. Each
// pool is one Redlock node, one independent Redis master: for N masters,
// make N pools and N nodes. redigo has no Redis Cluster client; use the
// goredis or rueidis backend for a cluster.
//
// A pool is one Redlock node only if every connection it dials reaches the
// same server. Its Dial and DialContext are functions, which New cannot
// inspect: a pool that dials several servers (round robin, or a Sentinel
// helper's dialler that dials the master of the moment) is accepted, and
// is not one node: a new connection may reach another server, where one
// lock key can be taken a second time, and a failover's promoted replica
// may lack a lock the old master acknowledged. Dial one server per pool.
//
// A node is named after its server, "host:port", as backends/goredis and
// backends/rueidis name one, so that errors and metrics name the server,
// and a server has one name, and every process the same herald, whatever
// the driver. Dial and NewPool know the address; a pool made otherwise
// cannot say which server it dials, and New refuses it without WithName.
//
// # Contexts
//
// Every command runs with redis.DoContext on a connection borrowed with
// GetContext, so the Locker's node timeout bounds waiting for a pooled
// connection, the command and its reply. Dialling is bounded only when the
// pool has DialContext: New refuses a *redis.Pool that dials with plain Dial
// (it would ignore the context) unless given WithUnboundedDial(true). NewPool
// builds a pool with DialContext. A connection must implement
// redis.ConnWithContext; those of *redis.Pool do.
//
// Each operation borrows a connection and returns it when the reply is in.
// redigo closes a connection whose context ended mid-command, and the pool
// discards a connection with an error instead of lending it again, so a
// late reply from a slow node is never read by the next command.
//
// # Commands and errors
//
// Acquire is SET key value PX ttl NX; the scripts go through EVALSHA and
// EVAL. Bulk replies ([]byte) become strings, a nil reply a plain result.
// A NOSCRIPT reply is classified driver.KindNoScript, context errors
// driver.KindContext, and every other error (connection refused, I/O
// timeout, a closed pool, server errors) driver.KindNodeFailure. The node
// never retries and never falls back from EVALSHA to EVAL itself: core does.
//
// A node made by New never closes the pool: it belongs to the caller. A
// node made by Dial closes the pool Dial made for it.
//
// # Compliance
//
// *Node implements core.Node and the optional capabilities driver.Batcher
// (EvalBatch writes a batch of script calls on one borrowed connection and
// reads the replies in order: one round trip) and driver.Watcher (Watch
// subscribes to a release channel on a connection it keeps for the
// subscription and closes at stop, instead of handing it back).
package redigo
