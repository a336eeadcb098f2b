// Package core is the portable API of quorumlock: distributed locks over N
// independent Redis masters with the Redlock algorithm.
//
//	locker, err := core.New(nodes, core.WithTTL(10*time.Second))
//	lock, err := locker.Acquire(ctx, "orders:42")
//	if err != nil { ... }
//	defer lock.Release(ctx)
//	// work while lock.Validity() > 0; lock.Extend(ctx) to keep it longer
//
// Nodes come from a backend package: backends/goredis for a go-redis client
// (single node or Redis Cluster), backends/redigo for a redigo
// pool, backends/rueidis for a rueidis client (single node or Redis
// Cluster), backends/memory for an in-process node. One Locker may mix
// them. The Locker runs the protocol; a node only carries commands.
//
// # The algorithm
//
// One acquisition round, as the Redlock specification describes it:
//
//  1. Draw a value of 20 random bytes (crypto/rand); note the start time.
//  2. Ask every node to set the key, each call bounded by the node timeout
//     (WithNodeTimeout), in the order and with the stopping rule of the
//     strategy (WithStrategy). What a node receives: SET key value NX PX
//     ttl for one or two nodes, and under WithoutRestartGuard; with three
//     nodes or more, the restart guard's script (ScriptAcquireGuarded,
//     EVALSHA), which reads the node's birth key and does the same SET;
//     with WithFencing, a script that also increments the key's counter
//     (ScriptAcquireFenced, or the guard's script with the counter). A
//     Redis Cluster node always gets the plain SET (or the fencing script).
//  3. The round wins if at least a quorum of nodes (N/2+1 unless
//     WithQuorum says more) set the key, and validity is left:
//     validity = TTL - elapsed - drift, drift = TTL x drift factor + 2 ms.
//  4. If it does not win, release the key on every node, including those
//     that seemed to refuse or fail (their reply may have been lost), even if
//     the caller's context has ended.
//
// Acquire repeats rounds with a random delay between them (WithRetryDelay)
// until one wins, the tries run out (WithTries) or the context ends;
// TryAcquire makes one round. Release runs a compare-and-delete script on
// every node at once, whatever the strategy; Extend runs a compare-and-pexpire
// script and succeeds only on a quorum within the current validity, with the
// new validity measured from the start of the extending round.
//
// # Keeping a lock, and knowing when it is gone
//
// Lock.KeepAlive extends a lock every TTL/3 (WithKeepAlive) until it is
// released, retrying within the remaining validity when nodes fail
// (WithKeepAliveRetry) and stopping at WithMaxHold. One goroutine per
// Locker renews all its kept-alive locks, the due ones together: one round
// trip per node per tick on Batcher nodes, however many locks. It runs
// only while some lock is kept alive; Release of the last one, and Close,
// end it.
//
// A lock ends when it is released, when an extension finds it gone from a
// quorum, or when its validity runs out (for a kept-alive lock: when no
// extension reached a quorum in time). Lock.Done is closed then, Lock.Err
// says why, and Lock.Context gives a context cancelled with that cause.
// Locker.Do ties it together: acquire, hold (Lock.Hold: keep alive, and a
// context that ends with the lock), run fn, release.
//
// # Closing
//
// Each kept lock has one owner, the keeper: a lock enters it only while
// held, and leaves it when it ends, whatever the interleaving of
// KeepAlive, Extend, Release, Do and Close. A Release that did not reach a
// quorum because nodes failed can be called again, and Close calls it
// again. Close never releases a lock whose holder is still at work (a Do
// function, an httplock handler, or any code between Lock.Hold and its
// done): it cancels the holder's context with a cause matching ErrClosed
// and waits for it; Locker.Shutdown bounds that wait with a context, as
// fx's stop hooks need.
//
// # Fast hand-off
//
// One node, the herald (the Locker's first node by name, the same for every
// Locker over the same servers), hands locks over. After a round lost to
// another holder, Acquire subscribes there to its Locker's channel for the
// key (WaiterChannel) and queues a ticket in the key's wait queue
// (QueueKey, on the herald). The holder's release pops the oldest ticket
// and publishes it on the channel of the ticket's Locker, so exactly that
// waiter wakes and takes the lock with an ordinary round: first come,
// first served across Lockers, with no herd splitting the votes. The
// herald's notice can arrive before the release has reached the other
// nodes; a woken waiter whose round loses for that reason tries again after
// pauses of 1, 2, 4... ms while a pause is shorter than the node timeout,
// and these follow-ups do not count against WithTries. A Locker whose
// release handed the key over queues behind the waiter instead of taking
// the key straight back. The queue only
// orders waiters; holding the lock still takes a quorum of SET NX. Locks
// that expire instead of being released publish nothing, and a herald that
// is down publishes nothing either: the retry delay covers both
// (WithWakeOnRelease turns the notices off).
//
// # Fencing tokens
//
// With WithFencing, Lock.Token is a number that grows with every
// acquisition of a key; see Lock.Token for the scheme, what it guarantees
// and what it assumes.
//
// # Guarantees and their limits
//
// While Lock.Validity is positive, no other client of a correctly configured
// deployment holds the lock, provided that: the nodes are independent (not
// replicas of each other), no node loses a held key while the lock is valid
// and votes again before it has expired (the restart guard enforces that
// for nodes that restart without persistence; see below), and clocks drift
// less than the drift allowance. A process pause (GC, swap)
// after checking Validity can still outlast it; a storage layer that must
// never see a stale writer needs fencing, which the Redlock scheme alone does
// not give: WithFencing adds it (Lock.Token).
//
// # Restart guard
//
// A node that restarts without persistence forgets the locks it held. With
// three nodes or more (or WithRestartGuard), acquisition is a script that
// also reads the node's birth key (BirthKey: when its data began, never
// expiring, lost in such a restart; written on first use as the time the
// server process started). A node whose data is younger than the guard's
// max TTL does not vote (*RestartGuardError, matching ErrNodeRestarted);
// when the quorum needs it, Acquire waits until it votes, within its
// context, and otherwise fails with a QuorumError whose Reason is
// ErrNodeRestarted. A server that has been up longer than the max TTL
// votes on its first use. Locker.Adopt declares fresh servers known to
// hold no lock. Sharded nodes (a Redis Cluster) are left out: see Sharded.
// What the guard cannot see (FLUSHALL, evictions) and the server settings
// that close it: docs/restart-guard.md.
//
// # One server, one vote
//
// Names are for people and for the herald's order; they cannot tell
// servers apart (one server reached through two drivers, or as localhost
// and 127.0.0.1, has two). So before a node's yes counts for the first
// time, and again after a failed call, core asks its server who it is
// (ScriptIdentify: IdentityKey, a random value the server keeps for good).
// A node whose server already votes under another node's name is a
// duplicate: it does not vote, and its outcome's error is a
// *DuplicateNodeError, which matches ErrDuplicateNode and
// ErrInvalidArgument and names both nodes. The first node to report an
// identity keeps the vote; a Redis Cluster's identity is on the master of
// IdentityKey's slot. ACLs must let the lock user read and write
// IdentityKey (and BirthKey). The check costs a round trip or two at a
// node's first yes and after a failure, nothing on later calls.
//
// # Choosing a strategy
//
// strategies.Parallel (the default) asks every node at once: a round costs
// one round trip, or one node timeout when a node is down.
// strategies.Sequential asks one node after the other, as the specification
// does: a round costs N round trips and each dead node one node timeout.
// strategies.FailFast is Parallel that gives up a round as soon as quorum is
// impossible, which frees contended keys fastest. All are greedy by default;
// strategies.StopAtQuorum makes them stop at the quorum-th vote.
//
// # Errors
//
// Errors match a category with errors.Is: ErrNotAcquired (someone else holds
// the lock), ErrUnavailable (more than N - quorum nodes failed: an outage),
// ErrValidityExpired (a round too slow to leave validity), ErrLockLost (an
// extension found the lock gone), ErrNotHeld (releasing or extending a lock
// that is not held), ErrInvalidArgument and ErrClosed. Round failures are a
// *QuorumError listing each node's outcome, error and latency; when the
// caller's context ended they also match context.Canceled or
// context.DeadlineExceeded. A node that misses the node timeout has an error
// matching ErrNodeTimeout, never context.DeadlineExceeded, so the latter
// always means the caller's own deadline.
//
// # Implementing a Node
//
// A backend is a transport for one Redis master, cluster or stand-in:
//
//   - Implement every method of Node. SetNX sends SET key value NX PX ttl;
//     EvalSHA and Eval send EVALSHA and EVAL with the keys and arguments as
//     given. Core decides every key, value and script.
//   - Turn nil replies (a missing key, a Lua false) into plain results, and
//     integer replies into int64. Return driver errors unwrapped.
//   - Honour the context in every call that reaches the network: a call must
//     return soon after its context ends. Core bounds each call by the node
//     timeout through the context alone.
//   - Classify errors: NOSCRIPT is KindNoScript (core then resends the script
//     with EVAL), context errors KindContext, everything else
//     KindNodeFailure. Never retry inside the node. (Core itself runs a
//     release or extend script once more at once after a node failure that
//     left time on the context, typically a pooled connection to a server
//     that restarted: both scripts are idempotent, and only a "yes" from
//     the second run counts.)
//   - Keep one client's commands in order: a release sent after a SET whose
//     call was cancelled must reach the server after that SET, or the key
//     outlives the failed round until its TTL.
//   - On a Redis Cluster, every key core passes in one call hashes to one
//     slot (see HashSlot); route by it.
//   - Give each node a distinct String, the same for a server whatever the
//     driver: its address, "host:port" as the user gave it, or "cluster:"
//     and a cluster's addresses, sorted and joined by commas. Core refuses
//     a Locker whose nodes share a name, and the first node by name is
//     the herald; which server a node is, core asks the server (see One
//     server, one vote).
//   - Close what the node created, never a client the user handed in.
//   - Pass the conformance suite (package conformance) from your tests.
//
// Optional capabilities are small extra interfaces that a Node may
// implement, discovered by a type assertion, each with a fallback that gives
// the same results: Batcher (many scripts in one round trip, used by the
// keep-alive; without it, calls go one by one) and Watcher (release-notice
// subscriptions, used to wake waiters; without it, waiters poll). The
// drivers of this module implement both. Sharded says a node spreads its
// keys over several servers, which leaves it out of the restart guard; a
// node that wraps another must forward it.
//
// # Package dependencies
//
// The quorum policies live in package strategies, a leaf that imports only
// the standard library. Core imports strategies, and not the other way round,
// so that New can default to strategies.Parallel without an import cycle;
// Strategy here is an alias of strategies.Strategy. Core itself imports
// nothing beyond the standard library, strategies and one internal helper
// of the same kind: no driver, no metrics, no tracing.
package core
