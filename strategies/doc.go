// Package strategies holds the quorum policies of quorumlock: how the N
// attempts of one Redlock round run, and when the round stops.
//
// A strategy knows nothing of Redis, drivers or locks. It receives a Round
// (the node count, the quorum, a per-attempt timeout and an Attempt function
// that says whether node i voted for the caller) and reports each node's
// Result. The caller, core.Locker, counts the votes itself, computes the
// lock's validity, and releases every node after a failed round, so a
// strategy cannot make a lock unsafe; it decides only latency and load.
//
// # The built-in strategies
//
//   - Sequential: the Redlock specification's algorithm, one node after the
//     other, each with its own timeout. The most predictable load.
//   - Parallel: every node at once (the specification's "multiplexing");
//     a round costs the slowest attempt instead of the sum of them.
//     The default of core.New.
//   - FailFast: Parallel that ends the round as soon as quorum is impossible
//     (more than N - quorum nodes refused or failed), like Redisson's RedLock.
//     Under heavy contention it gives up a lost round without waiting for slow
//     nodes.
//
// Each is greedy by default (it asks every node, so the lock lands on as
// many nodes as possible) and takes the option WithStopAtQuorum(true) to
// stop once a quorum has voted.
//
// # Writing a strategy
//
// Implement Strategy and check it with the strategytest package, which pins
// down the contract every strategy must keep: never start an attempt once the
// context is done, bound each attempt by Round.Timeout, report every node,
// and never return while an attempt is still running.
//
// This package imports only the standard library; core imports it (and not
// the other way round) so that core.New can default to Parallel.
package strategies
