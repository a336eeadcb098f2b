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
// An Acquire, TryAcquire, Extend or Release begins its span when it
// starts (the Observer's Start hook, see core.Observer) and ends it when it
// returns. The operation's node calls run with the span in their context,
// so a driver's own spans (redisotel for go-redis, rueidisotel,
// valkeyotel) are its children:
//
//	request
//	  quorumlock.acquire
//	    evalsha   (one per node, from redisotel)
//	    evalsha
//	    evalsha
//	  quorumlock.release
//	    evalsha
//	    ...
//
// Events without a start (keep-alive extensions, losses) become spans made
// after the fact, from the event's Start to Start+Duration. The spans are
// named
//
//   - "quorumlock.acquire": an Acquire or TryAcquire call, retries and
//     waits for the restart guard (core.OpWait, which gets no span of
//     its own) included;
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
// Attribute names follow OpenTelemetry's semantic conventions where one
// exists. Every span has
//
//   - db.system.name: "redis";
//   - quorumlock.key: the lock's key, as given to Acquire
//     (WithKeys(KeysOmitted) leaves it out, WithKeys(KeysHashed) replaces
//     it with a hash);
//   - quorumlock.lock: the kind of lock (core.Event's Lock): "mutex"
//     (Acquire), "multi" (AcquireAll) or "shared" (AcquireShared);
//   - quorumlock.outcome: core.Reason of the error ("ok", "contended",
//     "unavailable", "lost", ...), also as error.type when it is not "ok";
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
// server.address (and server.port when the node's name is host:port),
// quorumlock.node.index, quorumlock.node.name, quorumlock.node.outcome
// ("ok", "refused", "failed", "canceled", "not-tried"),
// quorumlock.node.latency_ms (a float) and, for a failed node, error.type
// ("timeout", "restarted", "duplicate_node", "canceled" or "node_failure")
// and quorumlock.node.error. The events are stamped with the span's end, when
// the results were known; the latency says when each node answered.
//
// # Status
//
// A span whose operation succeeded keeps the Unset status. Any other
// outcome sets the Error status, contention included: a TryAcquire that
// finds the lock held did not get what it asked for, and the outcome
// attribute tells contention apart from outages for those who filter on
// it. The status description is the error's text and the error is also
// recorded as an exception event; with WithKeys(KeysOmitted) or
// WithKeys(KeysHashed), whose point is to keep keys out of traces, the
// description is the outcome word instead and no exception is recorded,
// because quorumlock's error texts quote the key.
package tracing
