// Command lockbench compares quorumlock with its peers (redsync,
// rueidislock, bsm/redislock) and with library-free floors, against real
// redis-server processes on loopback.
//
//	cd benchmarks && go run ./cmd/lockbench             # the full run, several minutes
//	go run ./cmd/lockbench -quick -json /dev/null       # a smoke test
//	go run ./cmd/lockbench -systems 'rueidis' -modes contended -nodes 3
//
// It starts five redis-server processes once (conformance/redistest: free
// loopback ports, no persistence); a measurement over N servers uses the
// first N. Every measurement opens fresh instances of the system (new
// clients, new Lockers), uses a key prefix of its own, and closes them
// after, checking that no goroutine outlives them.
//
// Measurements are interleaved, so that a slow phase of the machine
// spreads over every system: for each run, for each node count, for each
// mode, for each system. The modes:
//
//   - uncontended: one goroutine acquires and releases a fresh key, again
//     and again: ops/s, latency of acquire+release (p50, p99) and of the
//     acquire alone, heap allocations and bytes per operation;
//   - parallel: the same with 64 goroutines sharing one instance;
//   - contended-shared: 16 goroutines take one key in turn through one
//     instance: acquisitions/s, hand-off latency, the wait of waiters,
//     the share of acquisitions won by the goroutine that just released,
//     mutual-exclusion violations and failed acquisitions;
//   - contended-multi: the same, each goroutine with its own instance and
//     clients, as 16 processes would be;
//   - hung-uncontended, dead-uncontended: uncontended, with one server
//     failed for the whole measurement: hung (stopped with SIGSTOP: it
//     keeps its connections and answers nothing) or dead (shut down:
//     connections refused). Also the errors (failed operations);
//   - hung-contended, dead-contended: contended-shared, with the same
//     failed server.
//
// The degraded modes (hung-*, dead-*) run from N=3 on, where a majority
// is left. The failed server is quorumlock's herald, the node that carries
// release notices and the wait queue: quorumlock orders its nodes by name,
// and a node over one server is named by its address, so the herald is
// the server among the N whose "127.0.0.1:PORT" sorts first as a string.
// The other systems lose the same server. Each degraded measurement opens
// fresh instances, warms them up healthy (connections to every server
// open), fails the herald, warms up again for 200 ms, untimed, so that the
// system has noticed, and then measures, every acquire and release under a
// context deadline of 1 s (the contended acquisitions under 30 s, as in
// contended-shared): a system that waits out the hung server, as redsync
// does, records failures or a low rate instead of hanging the run. The
// herald is then brought back before the instances close: continued
// (SIGCONT), or restarted on its port, waited for until it answers, and
// adopted for quorumlock's restart guard (its birth key set to 0), so that
// later measurements find every server healthy. The floors bound each
// call to a node by 50 ms (quorumlock's default node timeout) in the
// degraded modes, and by nothing in the others.
//
// rueidislock and bsm/redislock lock on one server and are measured with
// N=1 only; the floors take part in the uncontended modes (healthy and
// degraded) and the parallel mode only.
//
// Flags:
//
//	-nodes 1,3,5        node counts
//	-duration 1s        length of each measurement
//	-runs 2             runs of the whole set, reported side by side
//	-systems REGEX      only systems whose name matches
//	-modes REGEX        only modes whose name matches
//	-json PATH          one JSON object per measurement (default
//	                    lockbench.jsonl; empty: none)
//	-quick              smoke test: -duration 200ms -runs 1 unless given,
//	                    and no degraded modes unless -modes is given
//
// Progress goes to standard error; the report, markdown, to standard
// output: the machine and settings first, the tables per mode and the
// Targets section at the end, which compares quorumlock with its floors
// and peers in each mode, and, for the degraded modes, with itself in the
// healthy mode (hung-uncontended ops/s ÷ uncontended ops/s, for one).
//
// lockbench exits 3 when a quorumlock measurement was unsound in any mode,
// degraded ones included (an overlap of two holders, a hung operation, a
// leaked goroutine, a measurement that could not be made), and 1 when a
// failed server could not be brought back (it stops there).
package main
