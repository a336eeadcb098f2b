package conformance_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/internal/countnode"
)

// benchDrivers are the drivers the lifecycle benchmarks compare.
var benchDrivers = []struct {
	name    string
	factory redistest.NodeFactory
}{
	{"goredis", goredisSingle},
	{"redigo", redigoSingle},
	{"rueidis", rueidisSingle},
}

// startServers starts n redis-server processes for a benchmark.
func startServers(b *testing.B, n int) []string {
	b.Helper()
	redistest.RequireServer(b)
	addrs := make([]string, n)
	for i := range addrs {
		s, err := redistest.StartServer(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		addrs[i] = s.Addr()
	}
	return addrs
}

// benchNodes makes one node per server with factory, closed when b ends.
func benchNodes(b *testing.B, factory redistest.NodeFactory, addrs []string) []core.Node {
	b.Helper()
	nodes := make([]core.Node, len(addrs))
	for i, a := range addrs {
		n, closeClient, err := factory(a)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = closeClient() })
		nodes[i] = n
	}
	return nodes
}

// countedNodes is benchNodes with each node wrapped to count its calls
// (keeping its capabilities).
func countedNodes(b *testing.B, factory redistest.NodeFactory, addrs []string) ([]core.Node, []*countnode.Counts) {
	b.Helper()
	nodes := benchNodes(b, factory, addrs)
	counts := make([]*countnode.Counts, len(nodes))
	for i, n := range nodes {
		nodes[i], counts[i] = countnode.Wrap(n)
	}
	return nodes, counts
}

// BenchmarkHandoff measures the hand-off of a lock from its holder to a
// waiter blocked in Acquire, with release notices (wake=on) and without
// (wake=off: the waiter polls with the default 50-250 ms retry delay).
// Each sample is the time from the holder's Release returning to the
// waiter's Acquire returning (negative when the waiter had won before the
// holder's call returned); the two Lockers then swap roles. It reports the
// median and the 99th percentile of b.N samples.
//
//	go test -run '^$' -bench Handoff -benchtime 200x ./conformance/
func BenchmarkHandoff(b *testing.B) {
	addrs := startServers(b, 3)
	for _, d := range benchDrivers {
		for _, wake := range []bool{true, false} {
			name := fmt.Sprintf("%s/wake=%s", d.name, map[bool]string{true: "on", false: "off"}[wake])
			b.Run(name, func(b *testing.B) { benchHandoff(b, d.factory, addrs, wake) })
		}
	}
}

func benchHandoff(b *testing.B, factory redistest.NodeFactory, addrs []string, wake bool) {
	type side struct {
		l      *core.Locker
		counts []*countnode.Counts
	}
	sides := make([]side, 2)
	watchers := true
	for i := range sides {
		nodes, counts := countedNodes(b, factory, addrs)
		for _, n := range nodes {
			if _, ok := n.(driver.Watcher); !ok {
				watchers = false
			}
		}
		l, err := core.New(nodes, core.WithWakeOnRelease(wake))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		sides[i] = side{l, counts}
	}
	// The waiter has lost a round once its clean-up of it (the release
	// script, on node 0 as on every node) has gone out; with release
	// notices it makes a second round once subscribed, and waits after
	// that one.
	lost := int64(1)
	if wake && watchers {
		lost = 2
	}
	scripts := func(c *countnode.Counts) int64 { return c.EvalSHA.Load() + c.Eval.Load() }

	ctx := b.Context()
	key := fmt.Sprintf("bench:handoff:%p", b)
	held, err := sides[0].l.TryAcquire(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	samples := make([]time.Duration, 0, b.N)
	holder := 0
	b.ResetTimer()
	for range b.N {
		waiter := sides[1-holder]
		before := scripts(waiter.counts[0])
		type result struct {
			lock *core.Lock
			err  error
			at   time.Time
		}
		done := make(chan result, 1)
		go func() {
			lock, err := waiter.l.Acquire(ctx, key)
			done <- result{lock, err, time.Now()}
		}()
		for scripts(waiter.counts[0])-before < lost {
			select {
			case r := <-done:
				b.Fatalf("the waiter returned while the lock was held: %v", r.err)
			case <-time.After(50 * time.Microsecond):
			}
		}
		if err := held.Release(ctx); err != nil {
			b.Fatal(err)
		}
		released := time.Now()
		r := <-done
		if r.err != nil {
			b.Fatal(r.err)
		}
		samples = append(samples, r.at.Sub(released))
		held, holder = r.lock, 1-holder
	}
	b.StopTimer()
	if err := held.Release(ctx); err != nil {
		b.Fatal(err)
	}
	slices.Sort(samples)
	b.ReportMetric(float64(percentile(samples, 50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(samples, 99).Microseconds()), "p99-µs")
}

// percentile returns the p-th percentile of sorted samples (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(0, min(len(sorted), i)-1)]
}

// BenchmarkKeepAlive10k holds 10,000 kept-alive locks on distinct keys
// over three servers and measures, over about three seconds of holding:
// the requests each node receives per renewal tick (one when the node is a
// driver.Batcher and every due lock goes in one batch), the goroutines
// running, and the heap per held lock. Every lock must still be valid at
// the end. It runs once per driver whatever b.N is; the point is the
// reported metrics, not ns/op.
//
//	go test -run '^$' -bench KeepAlive10k -benchtime 1x ./conformance/
func BenchmarkKeepAlive10k(b *testing.B) {
	addrs := startServers(b, 3)
	for _, d := range benchDrivers {
		b.Run(d.name, func(b *testing.B) {
			// Once, whatever b.N: a run takes seconds, and what it
			// measures is in the metrics, not in ns/op.
			benchKeepAlive(b, d.factory, addrs, 10_000, 3*time.Second)
		})
	}
}

func benchKeepAlive(b *testing.B, factory redistest.NodeFactory, addrs []string, locks int, hold time.Duration) {
	ctx := b.Context()
	nodes, counts := countedNodes(b, factory, addrs)
	// A node timeout above the default: acquisitions and releases share the
	// connections with batches of thousands of renewals.
	l, err := core.New(nodes, core.WithTTL(3*time.Second), core.WithKeepAlive(time.Second),
		core.WithNodeTimeout(500*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapAlloc

	held := make([]*core.Lock, locks)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < locks; i = int(next.Add(1)) - 1 {
				lock, err := l.TryAcquire(ctx, fmt.Sprintf("bench:keepalive:%p:%d", b, i))
				if err == nil {
					err = lock.KeepAlive()
				}
				if err != nil {
					failed.Store(err)
					return
				}
				held[i] = lock
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}

	// The window: every lock is held and kept alive from here.
	trips := make([]int64, len(counts))
	for i, c := range counts {
		trips[i] = c.RoundTrips()
	}
	st := l.Stats()
	ticks, renewals := st.RenewalTicks, st.Renewals
	time.Sleep(hold / 2)
	goroutines := runtime.NumGoroutine()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapHeld := ms.HeapAlloc
	time.Sleep(hold - hold/2)
	st = l.Stats()
	ticks, renewals = st.RenewalTicks-ticks, st.Renewals-renewals
	var perNode float64
	for i, c := range counts {
		perNode += float64(c.RoundTrips() - trips[i])
	}
	perNode /= float64(len(counts))

	lost := 0
	for _, lock := range held {
		if lock.Validity() <= 0 {
			lost++
		}
	}
	if st := l.Stats(); lost > 0 || st.KeptAlive != locks {
		b.Fatalf("%d of %d locks no longer valid after %v; %d kept alive", lost, locks, hold, st.KeptAlive)
	}
	if ticks == 0 {
		b.Fatalf("no renewal tick in %v", hold)
	}
	for _, lock := range held {
		if err := lock.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}

	b.ReportMetric(perNode/float64(ticks), "roundtrips/tick/node")
	b.ReportMetric(float64(ticks), "ticks")
	// One extension per lock per keep-alive interval (1 s) when every
	// renewal succeeds at once; more means retries.
	b.ReportMetric(float64(renewals)/float64(locks)/hold.Seconds(), "renewals/lock/s")
	b.ReportMetric(float64(goroutines), "goroutines")
	b.ReportMetric(float64(int64(heapHeld)-int64(heapBefore))/float64(locks), "bytes/lock")
}

// BenchmarkContended has 16 goroutines, each with its own Locker and
// clients (as 16 processes would), take one key over 1, 3 and 5 servers,
// holding it for no work, with release notices on and off. It reports
// acquisitions per second and the wait of acquisitions that took the lock
// over from another holder (p50, p99), and fails on any overlap of two
// holders.
//
//	go test -run '^$' -bench Contended -benchtime 2000x ./conformance/
func BenchmarkContended(b *testing.B) {
	addrs := startServers(b, 5)
	for _, n := range []int{1, 3, 5} {
		for _, wake := range []bool{true, false} {
			name := fmt.Sprintf("rueidis/N=%d/wake=%s", n, map[bool]string{true: "on", false: "off"}[wake])
			b.Run(name, func(b *testing.B) { benchContended(b, rueidisSingle, addrs[:n], wake) })
		}
	}
}

func benchContended(b *testing.B, factory redistest.NodeFactory, addrs []string, wake bool) {
	const workers = 16
	lockers := make([]*core.Locker, workers)
	for i := range lockers {
		nodes, _ := countedNodes(b, factory, addrs)
		l, err := core.New(nodes, core.WithWakeOnRelease(wake), core.WithTries(1_000_000))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		lockers[i] = l
	}
	var (
		left    atomic.Int64
		inside  atomic.Int32
		overlap atomic.Int32
		mu      sync.Mutex
		waits   []time.Duration
		last    = -1
	)
	left.Store(int64(b.N))
	key := fmt.Sprintf("bench:contended:%d", time.Now().UnixNano())
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g, l := range lockers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				lock, err := l.Acquire(b.Context(), key)
				if err != nil {
					b.Error(err)
					return
				}
				wait := time.Since(t0)
				if inside.Add(1) != 1 {
					overlap.Add(1)
				}
				mu.Lock()
				if last != g {
					waits = append(waits, wait)
				}
				last = g
				mu.Unlock()
				inside.Add(-1)
				if err := lock.Release(b.Context()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if overlap.Load() > 0 {
		b.Fatalf("%d overlapping holders", overlap.Load())
	}
	slices.Sort(waits)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(percentile(waits, 50).Microseconds()), "wait-p50-µs")
	b.ReportMetric(float64(percentile(waits, 99).Microseconds()), "wait-p99-µs")
}
