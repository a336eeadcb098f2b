// Package core is the portable API of quorumlock: distributed locks over N
// independent Redis masters with the Redlock algorithm.
//
//	locker, err := core.New(nodes, core.WithTTL(10*time.Second))
//	lock, err := locker.Acquire(ctx, "orders:42")
//	if err != nil { ... }
//	defer lock.Release(ctx)
//	// work while lock.Validity() > 0; lock.Extend(ctx) to keep it longer
//
// Nodes come from a backend package: backends/goredis (a go-redis client,
// single node or Redis Cluster), backends/redigo (a redigo pool),
// backends/rueidis (a rueidis client, single node or Redis Cluster),
// backends/valkey (a valkey-go client, likewise) or backends/memory
// (in-process). One Locker may mix them. The Locker runs
// the protocol; a node only carries commands.
//
// # The algorithm
//
// One acquisition round, as the Redlock specification describes it:
//
//  1. Draw a value of 20 random bytes (crypto/rand); note the start time.
//  2. Ask every node to set the key (SET key value NX PX ttl, or a script
//     that also does the restart guard's or fencing's part), each call
//     bounded by the node timeout (WithNodeTimeout), in the order and with
//     the stopping rule of the strategy (WithStrategy).
//  3. The round wins if a quorum (N/2+1 unless WithQuorum says more) set
//     the key and validity is left:
//     validity = TTL - elapsed - drift, drift = TTL x drift factor + 2 ms.
//  4. If it does not win, release the key on every node, including those
//     that seemed to refuse or fail, even if the caller's context has ended.
//
// Acquire repeats rounds with a random delay between them (WithRetryDelay)
// until one wins, the tries run out (WithTries) or the context ends;
// TryAcquire makes one round. Release runs a compare-and-delete script on
// every node, whatever the strategy; Extend runs a compare-and-pexpire
// script and succeeds only on a quorum within the current validity. What
// is sent, and why each step is there: docs/design.md.
//
// # Holding a lock
//
// Lock.KeepAlive extends a lock every TTL/3 (WithKeepAlive) until it ends;
// one goroutine per Locker renews all kept-alive locks together. A lock
// ends when it is released, when an extension finds it gone, when it is
// at risk (an extension failed, and less than the at-risk margin of
// validity is left: ErrLockAtRisk, with that margin left to stop), or when
// its validity runs out: Lock.Done is closed, Lock.Err says why, and
// Lock.Context gives a context cancelled with that cause. Locker.Do ties
// it together: acquire, hold (Lock.Hold), run fn, release. Close never
// releases a lock whose holder is still at work: it cancels the holder's
// context with a cause matching ErrClosed and waits for it;
// Locker.Shutdown bounds that wait. See docs/keepalive.md.
//
// # Beyond the specification
//
//   - Fast hand-off (WithWakeOnRelease): a waiter that lost to a holder
//     queues on one node, the herald, and the holder's release wakes the
//     oldest waiter across Lockers. See docs/handoff.md.
//   - Restart guard (WithRestartGuard, on for three nodes or more): a node
//     whose data is younger than the max TTL, such as a server restarted
//     without persistence, does not vote (ErrNodeRestarted) until the
//     locks it may have forgotten have expired. See docs/restart-guard.md.
//   - One server, one vote: before a node's yes counts, core asks its
//     server who it is, so that one server listed under two names votes
//     once (ErrDuplicateNode). See docs/safety.md.
//   - Fencing tokens (WithFencing): Lock.Token grows with every
//     acquisition of a key. See docs/fencing.md.
//
// # Guarantees and their limits
//
// While Lock.Validity is positive, no other client holds the lock,
// provided the nodes are independent (not replicas of each other), no node
// loses a held key and votes again before it has expired, and clocks drift
// less than the drift allowance. A process pause after checking Validity
// can outlast it; a storage layer that must never see a stale writer needs
// fencing tokens. See docs/safety.md.
//
// # Strategies
//
// strategies.Parallel (the default) asks every node at once;
// strategies.Sequential asks one after the other, as the specification
// does; strategies.FailFast gives up a round as soon as quorum is
// impossible. All are greedy unless given strategies.WithStopAtQuorum(true). See
// docs/options.md.
//
// # Errors
//
// Errors match a category with errors.Is: ErrNotAcquired (held by someone
// else), ErrUnavailable (an outage), ErrNodeRestarted, ErrValidityExpired,
// ErrLockLost, ErrNotHeld, ErrInvalidArgument and ErrClosed. Round failures
// are a *QuorumError listing each node's outcome; when the caller's context
// ended they also match context.Canceled or context.DeadlineExceeded,
// which never stand for a node's timeout (ErrNodeTimeout). See
// docs/errors.md.
//
// # Writing a backend
//
// A backend implements Node (package core/driver) as a transport; core
// decides every key, value and script. The optional driver.Batcher,
// driver.Watcher and driver.Sharded add pipelined renewals, release
// notices, and leaving a Redis Cluster out of the restart guard. A backend
// proves itself with package conformance. What core expects of a node:
// docs/design.md.
package core
