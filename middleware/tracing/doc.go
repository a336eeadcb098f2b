// Package tracing records what a quorumlock Locker does as OpenTelemetry
// spans: an Observer (core.Observer) to add with core.WithObserver. It is a
// Go module of its own (github.com/quorumlock/quorumlock/middleware/tracing)
// so that only programs that import it depend on OpenTelemetry; core and
// the backends stay free of it.
//
//	locker, err := core.New(nodes, core.WithObserver(tracing.New()))
//
// # Spans
//
// Each event becomes one span, made after the fact: it starts at the
// event's Start and ends Duration later, so it covers the operation
// exactly although the Observer only hears of it at the end. The spans
// are named
//
//   - "quorumlock.acquire": an Acquire or TryAcquire call, retries included;
//   - "quorumlock.extend": one extending round, by Extend or the keep-alive;
//   - "quorumlock.release": a Release (or the release Locker.Close makes);
//   - "quorumlock.lost": a held lock ended without a release. It has no
//     duration and no parent: it is noticed by the Locker, not in a call.
//
// The first three are of kind Client, as they are calls to the nodes;
// "quorumlock.lost" is Internal. A span's parent is the span in the
// context given to the operation (Acquire, Extend, Release), so lock
// operations nest under the request that made them. Extensions made by
// the keep-alive have no caller, and so no parent.
//
// # Attributes
//
// Every span has
//
//   - quorumlock.key: the lock's key, as given to Acquire (WithoutKeys
//     leaves it out, WithHashedKeys replaces it with a hash);
//   - quorumlock.outcome: core.Reason of the error ("ok", "contended",
//     "unavailable", "lost", ...);
//
// and, where they apply,
//
//   - quorumlock.tries: the rounds an acquisition made;
//   - quorumlock.token: the fencing token of an acquired lock
//     (core.WithFencing), when not zero;
//   - quorumlock.validity_ms: the validity, in whole milliseconds, after a
//     successful acquisition or extension;
//   - quorumlock.nodes.ok, quorumlock.nodes.refused, quorumlock.nodes.failed:
//     how many nodes granted, refused (held by another owner) and failed
//     in the operation's last round.
//
// Each node of the last round adds a span event "quorumlock.node" with
// quorumlock.node.index, quorumlock.node.name, quorumlock.node.outcome
// ("ok", "refused", "failed", "canceled", "not-tried"),
// quorumlock.node.latency_ms (a float) and, for a failed node,
// quorumlock.node.error. The events are stamped with the span's end, when
// the results were known; the latency says when each node answered.
//
// # Status
//
// A span whose operation succeeded keeps the Unset status. Any other
// outcome sets the Error status, contention included: a TryAcquire that
// finds the lock held did not get what it asked for, and the outcome
// attribute tells contention apart from outages for those who filter on
// it. The status description is the error's text and the error is also
// recorded as an exception event; with WithoutKeys or WithHashedKeys,
// whose point is to keep keys out of traces, the description is the
// outcome word instead and no exception is recorded, because quorumlock's
// error texts quote the key.
package tracing
