// Package valkey is the quorumlock backend for valkey-go
// (github.com/valkey-io/valkey-go), in a Go module of its own so that
// users of the other backends do not download the driver. Import it as
// qlvalkey. Dial makes one node per independent master, each owning its
// client, or with WithCluster(true) one node of a whole cluster:
//
//	nodes, closeAll, err := qlvalkey.Dial([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"})
//	locker, err := core.New(nodes) // if it fails: closeAll()
//
// New makes a node of a client of your own, which stays yours to close:
// valkey.NewClient(qlvalkey.ClientOption(addr)), then qlvalkey.New(client).
// A client is one Redlock node, of one server or of one cluster (Sharded:
// the restart guard leaves it out); New refuses Sentinel clients and
// clients with replicas or redirects.
//
// valkey-go is a fork of rueidis, and the node is backends/rueidis's over
// it, generated from rueidis's source by internal/generate (go generate);
// TestGeneratedFromRueidis fails when the two are out of step, so that a
// fix lands once, in rueidis. ClientOption turns client-side caching
// (CLIENT TRACKING) and retries off, and sends every call through the
// pipeline (AlwaysPipelining), where it ends with its context, on one
// connection per server (PipelineMultiplex -1), so that a clean-up
// release never overtakes the SET it undoes. Scripts are plain EVALSHA and
// EVAL (core falls back on NOSCRIPT itself); Lua false, a RESP3 false, is
// a nil reply. EvalBatch is one DoMulti. Watch is Receive, confirmed by the subscription hook, which
// UNSUBSCRIBEs through the return hook once the node's last watch of the
// channel stops: valkey-go leaves the subscription on the connection.
//
// What it needed beyond goredis and redigo (rueidis has a type of its own
// for it): valkey.NewClient connects before it returns, for up to its 5 s
// dial timeout over a hung server, so Dial makes the clients in parallel
// and returns, for one still connecting after the connect wait
// (WithConnectWait, core.DefaultNodeTimeout by default), the
// shared driver.Late node, whose calls wait for it within their own
// contexts and whose Close cuts the connection attempt short. And a
// cluster client's Receive opens a new connection when the last one
// broke, and waits for its handshake without the caller's context,
// bounded only by ConnWriteTimeout: ClientOption sets it to 2 s, as
// rueidis's does, so that a Watch on a hung master fails within about 2 s
// of its context's end (NodeContract/WatchOnPausedServer, which failed one
// run in four with 5 s).
package valkey

//go:generate go run ./internal/generate
