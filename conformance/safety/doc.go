// Package safety is a rig that tries to break the mutual exclusion of
// quorumlock locks under the faults Redlock claims to tolerate, and the
// checks that say when it did.
//
// Run starts a Rig (redis-server processes, each behind a Proxy, a
// toxiproxy proxy run in process) and many clients, each with its own
// core.Locker over nodes of the backend under test (Config.NewNode),
// dialled through its own proxies, that acquire a few shared keys.
// Meanwhile the faults of Schedule,
// drawn from Config.Seed, hit the servers: kills with restarts empty after
// more than the TTL, SIGSTOP/SIGCONT, latency above the node timeout,
// narrow bandwidth, hung links, proxies down, connection resets, and
// clients stalled past their validity right after acquiring (they must
// notice before use). Never more than N - quorum nodes are faulty at
// once. The majorities ring (Ring) cuts each client off from the nodes
// outside its own majority, a different one for each client.
//
// Config.Workload says what the clients take: one key's plain lock
// (MutexWorkload, the default); shared locks and plain locks (its writers)
// on one key (ReadWriteWorkload); sets of overlapping keys with
// AcquireAll (MultiKeyWorkload); or permits of semaphores with
// AcquirePermit (SemaphoreWorkload). Under each, a holder works on the
// registers of the keys it holds; a permit's holder counts itself in its
// key's count of holders (INCR on entry, DECR on exit), which must never
// read more than the permits.
//
// # What is recorded
//
// On one monotonic clock, the History's, every client records each
// operation on a lock (LockOp: acquire, extend, release, with its
// invocation and response times and its Outcome: OK, Failed, or Unknown
// when it may have taken effect, as an acquire that timed out may have set
// the key on some nodes). Inside each critical section it does a
// read-modify-write (GET, its work, SET of the value read plus one) of a
// register the lock protects, on a plain redis-server outside the rig that
// no fault touches (Registers), and records it (RegisterOp) and the
// section (Section: client, key, fencing token, start and end, and the end
// of its lock's validity). One time in four a holder extends its lock and
// works again.
//
// # How it is checked
//
// CheckHistories checks each key's histories for linearizability with
// porcupine (github.com/anishathalye/porcupine), as etcd's robustness
// tests and Jepsen's lock workloads do:
//
//   - the lock operations against LockModel, a readers-writer lock whose
//     state is its exclusive holder or its shared holders (a multi-key
//     lock's operations count in each of its keys' histories). A lease has no place in a model without a clock, so the
//     history carries it: a hold ends with an operation whose invocation
//     is the earlier of the release's invocation and the end of the lock's
//     validity as the client learnt it after the acquire or its last
//     extend (the nodes keep the lock until then, so no one else may take
//     it earlier), and whose response is the release's. A grant that
//     falls inside another client's hold, so defined, is a violation, used
//     or not. Failed and unknown acquires and extends are no-ops in the
//     model: a refusal is always allowed, and an acquire whose outcome is
//     unknown was never used and ended without a holder.
//   - the register operations against RegisterModel: each read-modify-write
//     is one atomic operation that must read the register's last value.
//     Two holders' updates that interleaved make the history not
//     linearizable, whether or not the clients could see it; so does any
//     overlap of sections in time, since each section contains its update.
//     A reader's section, under a shared lock, reads the register at its
//     start and at its end, one atomic operation that must read the
//     register's value twice: a writer's update between them fails.
//
// On a history that is not linearizable, porcupine's HTML visualisation is
// written into Config.HistoryDir, in a file named with the seed, and the
// Violation names it.
//
// Check keeps what porcupine cannot see, having neither clocks nor tokens
// in its models: sections entered after their validity ended or running
// past it (validity windows), and, with fencing, tokens that did not grow
// from one lock's sections to the next (fencing order). The Report also
// counts the lock keys left on the servers once the TTL has passed after
// the run, which must be none.
//
// The package's tests run a short version on every `make test`, check the
// models on hand-made histories, and show that porcupine fires on both
// histories in the one case the Redlock specification admits breaks
// Redlock (a node restarted at once, empty, while a lock is held) unless
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
