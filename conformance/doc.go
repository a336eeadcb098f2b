// Package conformance is the suite every quorumlock backend passes: one set
// of tests that proves a node of any driver behaves as the lock protocol
// needs, and that a Locker over such nodes keeps the Redlock properties.
//
// A backend's whole test is a harness and a call to Run. For real Redis,
// package redistest provides the harness; the backend gives only a function
// that builds its node for a server address:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, redistest.Harness(func(addr string) (core.Node, func() error, error) {
//			rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
//			node, err := goredis.New(rdb)
//			return node, rdb.Close, err
//		}))
//	}
//
// # What it checks
//
// NodeContract drives one node directly: SET NX PX semantics and millisecond
// TTLs, expiry, the release and extend scripts by source and by SHA (missing
// key, wrong value, right value), the identity script (written once, never
// expiring), NOSCRIPT classification and recovery after
// SCRIPT FLUSH, prompt return on cancelled contexts and on a paused server,
// errors from a closed client, long, binary and unicode keys, and concurrent
// use.
//
// Locker/N=<n>/<strategy> drives a core.Locker over three nodes with the
// parallel strategy (or, with WithFullMatrix, over 1, 3 and 5 nodes with
// every built-in strategy; see Scope): acquire and release, contention on a majority and
// a minority, two Lockers racing, mutual exclusion, extension and lost
// locks, release of a lock taken over, a cancelled acquisition leaving no
// key, a minority of servers down (still acquires), a majority down (the
// outage error, promptly), a paused server (no stall), a restarted server.
//
// MultiKey/N=<n>/<strategy> checks multi-key locks (Locker.AcquireAll)
// the same way: goroutines taking overlapping sets ({a,b}, {b,c}, {c,a}
// and single keys) through two Lockers never find one of their keys
// occupied and lose no increment of a per-key counter; a set refused by
// rivals on a quorum, on a different key on each server, or by an
// overlapping set leaves none of its keys; a set given out of order is
// held sorted, keeps out a plain lock, a reader and another set on any of
// its keys, and its release leaves no key; bad sets, and on Redis
// Clusters keys in different slots, are refused up front. A set is kept
// alive for three TTLs, and lost at the next extension once one of its
// keys is deleted from a majority (MultiKey/KeptAliveSurvives,
// MultiKey/DeletedKeyLostAtNextExtension). On a cluster harness a set's
// keys share a hash tag.
//
// Shared/N=<n>/<strategy> checks shared (read) locks
// (Locker.AcquireShared) with the plain lock as their writer: readers
// share and Inspect lists them; readers and writers taking one key
// concurrently, after the readers first met inside all at once, never
// overlap (a writer inside finds no reader and no writer, and loses no
// increment); a held writer refuses readers, which leave no entry, and a
// writer refused by a reader keeps new readers out while the one in
// extends; the last reader's release leaves neither the key nor its
// readers set. A reader is kept alive for three TTLs, and lost at the next
// extension once its entry is deleted from a majority
// (Shared/KeptAliveSurvives, Shared/DeletedReaderLostAtNextExtension).
//
// Election/N=<n>/<strategy> checks leader election (Locker.Campaign,
// Leader, Observe): a second candidate leads only once the first resigns,
// with a greater term, and an observer on a third Locker sees both leaders
// by notices, well within its poll; candidates on three Lockers
// campaigning over and over never lead at once, and their terms increase.
// A leader whose key is deleted from a majority loses its context at the
// next extension, and an observer sees nobody lead within its poll
// (Election/DeletedKeyEndsLeadership); one whose majority of servers stops
// loses its context with the at-risk margin left
// (Election/MajorityGoneEndsLeadershipEarly).
//
// MutualExclusion/<strategy> has 32 goroutines increment a counter held on
// a server 50 times each (200 under QUORUMLOCK_LONG=1) under the lock, with
// a read-modify-write that only the lock makes atomic: the final count must
// be exact.
//
// NodeContract also checks that a release sent after a SET whose call was
// cancelled in flight reaches the server after it: a Locker's clean-up after
// a round that cancelled its calls depends on it.
//
// Lifecycle follows a lock after it is taken: a lock kept alive through Do
// for five TTLs stays on the servers and fn's context stays live; a
// majority of servers stopped under Do ends fn's context while the lock
// is still valid, with a cause matching core.ErrLockAtRisk,
// core.ErrLockLost and core.ErrUnavailable; a key
// deleted from every server is found lost by the next extension, well
// before the validity would run out; Release ends the lock (Done,
// core.ErrReleased) and its renewals; and a waiter in Acquire over nodes
// that are core.Watchers wakes on the holder's release instead of sleeping
// out its retry delay.
//
// Fencing checks core.WithFencing's tokens: 16 Lockers over five servers
// take one key 500 times (2000 under QUORUMLOCK_LONG=1;
// WithFencingAcquisitions), and on through five fault cycles at least,
// while one or two servers at a time are stopped and restarted with
// their data (Servers.StopKeepingData), and the tokens, in critical-section order,
// must strictly increase; and, over clusters when the harness has them,
// tokens per key (with and without hash tags) strictly increase through
// several Lockers, one after another and concurrently, with the counter
// (driver.FenceKey) on the servers at the last token.
//
// Cluster runs when the harness's servers are Redis Clusters
// (ClusterServers; redistest.ClusterHarness starts real 3-master ones):
// locks on keys over every master, every key of one lock in one hash slot
// (driver.HashSlot checked against CLUSTER KEYSLOT, with hash tags in keys and
// key prefixes), a master killed while locks are held and taken (the outage
// error, promptly, and the other masters unaffected), a master killed in
// one of three independent clusters (the other two still make a quorum),
// and the master that holds the cluster's identity (driver.IdentityKey)
// killed (the other masters unaffected).
//
// RunCrossDriver checks that drivers agree on the wire: a lock taken through
// each driver is held, extended and released correctly through each of the
// others, on the same servers. redistest.MixedHarness gives Run Lockers whose
// nodes are of different drivers.
//
// # Scope: each check where it can fail
//
// A strategy never touches a driver: it orders and stops the calls that
// core makes through the driver's nodes. So a backend is checked at one
// point of the strategy × size matrix by default, its driver scope: the
// Locker, MultiKey, Shared and Election groups at N=3 with parallel (greedy),
// MutualExclusion with parallel. Parallel is core.New's default, and three nodes are the
// fewest that reach all a driver does under a Locker: calls to several
// nodes of one driver at once, a minority refused or down beside a
// majority that answers, a paused node among live ones. A call cancelled
// in flight (what the stop-at-quorum modes and FailFast add) reaches a
// driver only as a cancelled context, which NodeContract checks on one
// node directly (CancelledContext, CancelledSetThenRelease,
// BatchCancelled). Every other group uses a strategy of its own and runs
// whole in every scope: NodeContract with the capabilities, RestartGuard,
// Lifecycle, NodeHealth, Fencing and Cluster.
//
// WithFullMatrix runs the Locker, MultiKey, Shared and Election groups over every
// strategy and size (their concurrent exclusion checks under the greedy
// strategies only), and MutualExclusion under each greedy strategy: it checks the strategies and
// core on real servers, which needs doing once, not once per driver (this
// project runs it on memory and on go-redis's single servers). The driver
// scope is the default because it is what a backend's author needs: the
// matrix would check this project's strategies again, at many times the
// cost, and nothing of the backend that the one point does not.
//
// QUORUMLOCK_LONG=1 in the environment (make long) gives every Run the
// full matrix and the long forms of MutualExclusion and Fencing; options
// given to Run still apply over it.
//
// Servers are shared by the tests of a run unless a test injects faults, in
// which case it gets servers of its own; tests isolate themselves by key.
// After the run, the harness is closed and no goroutine may be left.
// Under CI=true a missing redis-server fails the run instead of skipping it.
package conformance
