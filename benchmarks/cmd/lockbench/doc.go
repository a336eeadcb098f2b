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
//     and again: ops/s, latency of acquire+release (p50, p99), heap
//     allocations and bytes per operation;
//   - parallel: the same with 64 goroutines sharing one instance;
//   - contended-shared: 16 goroutines take one key in turn through one
//     instance: acquisitions/s, hand-off latency, the wait of waiters,
//     the share of acquisitions won by the goroutine that just released,
//     mutual-exclusion violations and failed acquisitions;
//   - contended-multi: the same, each goroutine with its own instance and
//     clients, as 16 processes would be.
//
// rueidislock and bsm/redislock lock on one server and are measured with
// N=1 only; the floors take part in the uncontended and parallel modes
// only.
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
//	-quick              smoke test: -duration 200ms -runs 1 unless given
//
// Progress goes to standard error; the report, markdown, to standard
// output: the machine and settings first, the tables per mode and the
// Targets section at the end.
package main
