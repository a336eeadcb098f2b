package conformance_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// BenchmarkDrivers measures one acquisition and release (two rounds over
// three real redis-server processes on loopback) through each driver, from
// one goroutine (latency) and from many (throughput, with distinct keys so
// that no round loses to contention).
//
//	go test -run '^$' -bench Drivers -benchmem ./conformance/
func BenchmarkDrivers(b *testing.B) {
	addrs := startServers(b, 3)
	for _, d := range benchDrivers {
		l, err := core.New(benchNodes(b, d.factory, addrs), core.WithStrategy(strategies.Parallel()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		var seq atomic.Int64
		cycle := func(b *testing.B, key string) error {
			lock, err := l.TryAcquire(b.Context(), key)
			if err != nil {
				return err
			}
			return lock.Release(b.Context())
		}
		b.Run(d.name+"/N=3/parallel/serial", func(b *testing.B) {
			b.ReportAllocs()
			key := fmt.Sprintf("bench:%s:serial", d.name)
			for b.Loop() {
				if err := cycle(b, key); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(d.name+"/N=3/parallel/concurrent", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(8) // 8 goroutines per CPU
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("bench:%s:%d", d.name, seq.Add(1))
				for pb.Next() {
					if err := cycle(b, key); err != nil {
						b.Error(err) // not Fatal: this is not the benchmark's goroutine
						return
					}
				}
			})
		})
	}
}

// BenchmarkRestartGuard measures what the restart guard costs: one
// acquisition and release over three real servers through each driver,
// with the guard on (the acquisition is a script that reads the server's
// TIME and the birth key) and off (a plain SET NX PX).
//
//	go test -run '^$' -bench RestartGuard -benchmem ./conformance/
func BenchmarkRestartGuard(b *testing.B) {
	addrs := startServers(b, 3)
	for _, d := range benchDrivers {
		for _, guard := range []struct {
			name string
			opt  core.Option
		}{
			{"on", core.WithRestartGuard(core.DefaultTTL)},
			{"off", core.WithRestartGuard(0)},
		} {
			l, err := core.New(benchNodes(b, d.factory, addrs), guard.opt)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = l.Close() })
			b.Run(d.name+"/N=3/guard="+guard.name, func(b *testing.B) {
				b.ReportAllocs()
				key := fmt.Sprintf("bench:guard:%s:%s", d.name, guard.name)
				for b.Loop() {
					lock, err := l.TryAcquire(b.Context(), key)
					if err != nil {
						b.Fatal(err)
					}
					if err := lock.Release(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
