// Package memory is an in-process quorumlock node: a key-value store with
// millisecond expiry that carries out the lock protocol itself, with no
// network and no Redis.
//
// It is a backend in its own right, not a mock: it passes the same
// conformance suite as the Redis backends, and it is the reference for what
// the protocol's commands mean. Use it for single-process programs, and as a
// fake in your own unit tests:
//
//	nodes := memory.NewNodes(3)
//	locker, err := core.New(memory.AsNodes(nodes))
//
// # Time
//
// Keys expire on the node's clock, the system clock by default. To test
// expiry, validity and retry waits without waiting, run the test in a
// testing/synctest bubble, where the system clock is fake for the nodes
// and the Locker alike; a ManualClock (WithClock) moves a node's time by
// hand on its own.
//
// # Faults
//
// Each Node can be stopped and started (it comes back empty, like a Redis
// server without persistence), paused (calls wait until Resume or their
// context ends, like a server stopped with SIGSTOP), slowed (SetLatency),
// made to lose replies after acting (DropReplies), made to forget its
// scripts (FlushScripts, like SCRIPT FLUSH), made to drop its pub/sub
// connections (DropConnections: each subscription hears the empty notice
// of a resubscription), and made to refuse new subscriptions
// (RefuseWatches). Set and Get read and write keys directly, to plant
// a rival lock holder or to check what a lock left behind.
//
// # Scripts
//
// The node cannot run Lua. It recognises the lock protocol's scripts
// (driver.Scripts) by their SHA1 and carries out their semantics; any other
// script is an error. Like Redis, it answers EVALSHA with NOSCRIPT until the
// script has been sent once with EVAL, so core's fallback path runs here too.
//
// # Compliance
//
// *Node implements core.Node and both optional capabilities: driver.Batcher
// (a batch pays the node's faults once, as one round trip does) and
// driver.Watcher (in-process subscriptions: a release of a key through this
// node that hands it to a queued ticket notifies the watchers of the
// ticket owner's channel, which is how Lockers sharing memory nodes hand a
// lock over at once; the wait queue is a list kept natively). StartKeepingData brings a
// stopped node back with its keys, as a server with persistence restarts.
package memory
