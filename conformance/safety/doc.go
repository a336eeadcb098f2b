// Package safety is a rig that tries to break the mutual exclusion of
// quorumlock locks under the faults Redlock claims to tolerate, and a
// checker that says when it did.
//
// Run starts a Rig (redis-server processes, each behind a faultproxy.Proxy)
// and many clients, each with its own core.Locker over nodes of the
// backend under test (Config.NewNode), that acquire a few shared keys.
// Inside each critical section a client records a Section (client, key,
// fencing token, start and end, and the end of its lock's validity) in a
// History, on one monotonic clock. Meanwhile the faults of Schedule,
// drawn from Config.Seed, hit the servers: kills with restarts empty after
// more than the TTL, SIGSTOP/SIGCONT, latency above the node timeout,
// partitions, connection resets, and clients stalled past their validity
// right after acquiring (they must notice before use). Never more than
// N - quorum nodes are faulty at once.
//
// Check finds overlapping sections of one key, sections entered after
// their validity or running past it, and, with fencing, tokens that did not
// grow. The Report also counts the lock keys left on the servers once the
// TTL has passed after the run, which must be none.
//
// The package's tests run a short version on every `make test`, and show
// that the checker fires on the one case the Redlock specification admits
// breaks it (a node restarted at once, empty, while a lock is held) unless
// the restart guard is on; its cmd/chaos runs the long version.
//
// RunEnvelope measures where the guarantee ends (cmd/envelope, the last
// step of `make chaos`): one server's clock runs fast under libfaketime
// (StartFastServer), holders pause below and past the TTL, and a register
// the lock protects, fenced or not, counts the stale writes it accepted,
// against what the drift allowance and the fencing rule predict
// (docs/safety.md, the safety envelope).
//
// It is a module of its own, so that its tools stay out of the library's
// go.mod.
package safety
