// Package metrics is a core.Observer that keeps Prometheus metrics of what
// a Locker does. It is a Go module of its own
// (github.com/quorumlock/quorumlock/middleware/metrics) so that only
// programs that import it depend on the Prometheus client; core and the
// backends stay free of it.
//
//	obs, err := metrics.New()
//	...
//	prometheus.MustRegister(obs) // New registers nothing: the caller does
//	locker, err := core.New(nodes, core.WithObserver(obs))
//
// # Metrics
//
// With the default namespace "quorumlock" (WithNamespace), an Observer
// exports:
//
//   - quorumlock_acquire_duration_seconds, a histogram with labels outcome
//     and lock: how long each acquisition took, retries included.
//   - quorumlock_operations_total, a counter with labels op ("acquire",
//     "extend", "release" or "lost"), outcome and lock: every event the Locker
//     reports. Each extending round counts, whether Extend or the
//     keep-alive made it; a loss counts under op "lost" beside the extend
//     that found it.
//   - quorumlock_locks_held, a gauge with label lock: successful
//     acquisitions minus releases.
//   - quorumlock_node_errors_total, a counter with labels node (the node's
//     name) and op ("acquire", "extend" or "release"): node calls that
//     failed or timed out (core.OutcomeFailed). Refusals, which are
//     contention, and calls cut off by a context are not errors.
//
// The outcome label is core.Reason of the operation's error: "ok",
// "contended", "unavailable", "expired", "lost", "not_held", "canceled",
// "closed", "invalid", "restarted" or "other", a small closed set. The
// lock label is the kind of lock (core.Event's Lock): "mutex" (Acquire),
// "multi" (AcquireAll), "shared" (AcquireShared), "semaphore"
// (AcquirePermit), "leader" (Campaign), or "other" for a kind
// this package does not know. Series appear when first used, but for
// quorumlock_locks_held{lock="mutex"}, there at 0 from the start. The
// names and other labels are as they were before the lock label: a query
// that sums by them, such as sum by (outcome), counts every kind together.
//
// # Locks held
//
// The gauge goes up on each successful acquisition and down on each
// release, whatever the release's outcome; a lost lock does not bring it
// down. A lock that is lost (an extension found it gone, or its validity
// ran out) is still a handle its owner must release, and Release after a
// loss is reported as a release with outcome "not_held"; counting the loss
// too would count that lock twice. So the gauge counts lock handles not
// yet released, which Locker.Close also releases, and
// quorumlock_operations_total{op="lost"} counts the losses. A Locker
// reports a lock's release only once, however often Release is called.
//
// # Cost
//
// Observe does no allocation and takes no lock on the common path: an
// event costs an atomic load of a cached series and an atomic add or two
// (the histogram's count, sum and bucket). A node error, which is rare,
// looks its series up by name.
package metrics
