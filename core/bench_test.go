package core_test

// Micro-benchmarks of the protocol's CPU and allocation cost per operation,
// over in-process memory nodes: no network, so the figures are core's own
// (plus the small cost of the memory backend) and catch regressions cheaply.
//
//	go test -run '^$' -bench . -benchmem ./core/
//
// Keys are precomputed, so that building them allocates nothing in the
// timed loops; each key is released before it comes round again, so every
// acquisition finds its key free.

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// benchKeyRing is how many distinct keys a benchmark loop cycles through.
const benchKeyRing = 1024

// benchStrategies are the strategies the acquisition benchmarks compare,
// each in its default (greedy) mode.
var benchStrategies = []struct {
	name string
	new  func() strategies.Strategy
}{
	{"sequential", func() strategies.Strategy { return strategies.Sequential() }},
	{"parallel", func() strategies.Strategy { return strategies.Parallel() }},
	{"failfast", func() strategies.Strategy { return strategies.FailFast() }},
}

// benchNodeTimeout replaces the default 50 ms node timeout: on a loaded
// machine a round's goroutines can wait that long to be scheduled, and
// their attempts would then not run at all. The timeout costs the same
// (one timer per bounded context) whatever its length.
const benchNodeTimeout = time.Second

// benchLocker returns a Locker over n fresh memory nodes, closed when b
// ends.
func benchLocker(b *testing.B, n int, opts ...core.Option) *core.Locker {
	b.Helper()
	opts = append([]core.Option{core.WithNodeTimeout(benchNodeTimeout)}, opts...)
	l, err := core.New(memory.AsNodes(memory.NewNodes(n)), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := l.Close(); err != nil {
			b.Error(err)
		}
	})
	return l
}

// benchKeys returns benchKeyRing distinct keys that start with prefix.
func benchKeys(prefix string) []string {
	keys := make([]string, benchKeyRing)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	return keys
}

// acquireRelease runs b's loop of TryAcquire and Release over keys.
func acquireRelease(b *testing.B, l *core.Locker, keys []string) {
	ctx := b.Context()
	i := 0
	for b.Loop() {
		lock, err := l.TryAcquire(ctx, keys[i%len(keys)])
		if err != nil {
			b.Fatal(err)
		}
		if err := lock.Release(ctx); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkAcquireRelease measures one uncontended TryAcquire (one winning
// round) and its Release, from one goroutine, per node count and strategy.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		for _, s := range benchStrategies {
			b.Run(fmt.Sprintf("N=%d/%s", n, s.name), func(b *testing.B) {
				b.ReportAllocs()
				l := benchLocker(b, n, core.WithStrategy(s.new()))
				acquireRelease(b, l, benchKeys("bench"))
			})
		}
	}
}

// BenchmarkAcquireReleaseParallel measures uncontended TryAcquire and
// Release from GOMAXPROCS goroutines sharing one Locker (parallel strategy),
// each on its own keys: the throughput and the cost of shared state.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	for _, n := range []int{3, 5} {
		b.Run(fmt.Sprintf("N=%d/parallel", n), func(b *testing.B) {
			b.ReportAllocs()
			l := benchLocker(b, n, core.WithStrategy(strategies.Parallel()))
			// RunParallel starts GOMAXPROCS goroutines (parallelism 1): each
			// takes one ring of keys, built here, outside the timing.
			rings := make([][]string, runtime.GOMAXPROCS(0))
			for g := range rings {
				rings[g] = benchKeys(fmt.Sprintf("bench:%d", g))
			}
			var next atomic.Int64
			ctx := b.Context()
			b.RunParallel(func(pb *testing.PB) {
				keys := rings[int(next.Add(1)-1)%len(rings)]
				i := 0
				for pb.Next() {
					lock, err := l.TryAcquire(ctx, keys[i%len(keys)])
					if err != nil {
						b.Error(err) // not Fatal: this is not the benchmark's goroutine
						return
					}
					if err := lock.Release(ctx); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}

// BenchmarkExtend measures one successful Extend of a held lock over three
// nodes (default parallel strategy).
func BenchmarkExtend(b *testing.B) {
	b.ReportAllocs()
	l := benchLocker(b, 3)
	ctx := b.Context()
	lock, err := l.TryAcquire(ctx, "bench:extend")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := lock.Extend(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := lock.Release(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTryAcquireHeld measures a TryAcquire that loses to a lock held
// by another Lock on three nodes: the losing round, the release of every
// node that follows it, and the *QuorumError it returns, per strategy.
func BenchmarkTryAcquireHeld(b *testing.B) {
	for _, s := range benchStrategies {
		b.Run("N=3/"+s.name, func(b *testing.B) {
			b.ReportAllocs()
			l := benchLocker(b, 3, core.WithStrategy(s.new()))
			ctx := b.Context()
			const key = "bench:held"
			holder, err := l.TryAcquire(ctx, key)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				// A type assertion, not errors.Is: QuorumError.Unwrap
				// allocates, and that cost is the caller's, not the round's.
				_, err := l.TryAcquire(ctx, key)
				if qe, ok := err.(*core.QuorumError); !ok || qe.Reason != core.ErrNotAcquired {
					b.Fatalf("TryAcquire of a held key: %v, want ErrNotAcquired", err)
				}
			}
			if err := holder.Release(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkAcquireReleaseFenced measures an uncontended TryAcquire with
// fencing tokens (the acquire-fenced script instead of SET NX) and its
// Release, over three nodes (default parallel strategy).
func BenchmarkAcquireReleaseFenced(b *testing.B) {
	b.ReportAllocs()
	l := benchLocker(b, 3, core.WithFencing(true))
	acquireRelease(b, l, benchKeys("bench:fenced"))
}
