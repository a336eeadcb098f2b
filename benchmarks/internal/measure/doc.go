// Package measure runs the measurements of lockbench against a
// systems.Instance and summarises them.
//
// Throughput runs workers that acquire and release a fresh key each time,
// for a fixed duration, and reports operations per second, the latency of
// acquire plus release (p50, p99, from a log-linear histogram with about
// 1.6% resolution, so recording allocates nothing), and the allocations and
// bytes allocated per operation by the whole process (runtime.MemStats
// deltas, after a runtime.GC). Keys are cut from one string built before
// the measurement, so making them allocates nothing either.
//
// Contention runs goroutines that take one key in turn and checks and
// times the hand-offs: every successful acquisition sets an "inside" flag
// with a compare-and-swap (a failed swap is a mutual-exclusion violation)
// and gets a sequence number; acquire and release times, all on one
// monotonic clock, are analysed by sequence number after the run.
//
// A Watchdog bounds both: operations still running a few seconds after the
// end are ended by closing the instances under test, and counted as hung.
//
// The degraded modes, with a server failed, bound every operation
// themselves: RunThroughput and WarmupFor with DegradedOpTimeout give each
// acquire and each release a context deadline of its own, and
// RunContention bounds releases the same way, so that a system that waits
// out a hung server fails operations rather than hanging. Throughput also
// reports the quantiles of the acquire alone.
package measure
