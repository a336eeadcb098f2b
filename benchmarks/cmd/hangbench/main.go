// Command hangbench measures what a herald that hangs under its waiters
// costs them (docs/design.md, the herald's failover): 16 goroutines of one
// Locker (redigo, five redis-servers, default options) take one key in
// turn; after 1 s the herald is stopped (SIGSTOP) for 1 s. Each of -iters
// measurements (fresh Locker, fresh key) prints the waits (Acquire's
// duration) of the acquisitions begun from 300 ms before the stop to 500
// ms after it, and those of the waiters waiting when it stopped.
//
//	cd benchmarks && go run ./cmd/hangbench -iters 5
//
// Unlike lockbench's hung-contended mode, which fails the herald before its
// warm-up, the stop falls inside the measurement. Compare builds in one
// run, interleaved: the machine's load moves the figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

func main() {
	iters := flag.Int("iters", 5, "measurements")
	flag.Parse()
	ctx := context.Background()
	var servers []*redistest.Server
	var addrs []string
	for range 5 {
		s, err := redistest.StartServer(ctx)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		defer s.Close()
		servers, addrs = append(servers, s), append(addrs, s.Addr())
	}
	herald := slices.Index(addrs, slices.Min(addrs))
	var all, span []time.Duration
	for it := range *iters {
		nodes, closeAll, err := redigo.Dial(addrs)
		if err != nil {
			panic(err)
		}
		l, err := core.New(nodes)
		if err != nil {
			panic(err)
		}
		key := fmt.Sprintf("hb:%d", it)
		var mu sync.Mutex
		type acq struct{ start, end time.Time }
		var acqs []acq
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					actx, cancel := context.WithTimeout(ctx, 30*time.Second)
					start := time.Now()
					lock, err := l.Acquire(actx, key)
					end := time.Now()
					cancel()
					if err != nil {
						continue
					}
					mu.Lock()
					acqs = append(acqs, acq{start, end})
					mu.Unlock()
					rctx, cancel := context.WithTimeout(ctx, time.Second)
					_ = lock.Release(rctx)
					cancel()
				}
			}()
		}
		time.Sleep(time.Second)
		hung := time.Now()
		if err := servers[herald].Pause(); err != nil {
			panic(err)
		}
		time.Sleep(time.Second)
		close(stop)
		wg.Wait()
		_ = servers[herald].Resume()
		_ = l.Close()
		_ = closeAll()
		var waits, spanning []time.Duration
		for _, a := range acqs {
			if a.start.Before(hung) && a.end.After(hung) {
				spanning = append(spanning, a.end.Sub(a.start))
			}
			if a.start.After(hung.Add(-300*time.Millisecond)) && a.start.Before(hung.Add(500*time.Millisecond)) {
				waits = append(waits, a.end.Sub(a.start))
			}
		}
		slices.Sort(waits)
		slices.Sort(spanning)
		fmt.Printf("iter %d: %d acquisitions around the hang, p50 %v p99 %v max %v; %d waiting at the hang: p50 %v max %v\n", it, len(waits), q(waits, .5), q(waits, .99), q(waits, 1), len(spanning), q(spanning, .5), q(spanning, 1))
		all = append(all, waits...)
		span = append(span, spanning...)
		time.Sleep(200 * time.Millisecond)
	}
	slices.Sort(all)
	slices.Sort(span)
	fmt.Printf("all: %d acquisitions, p50 %v p99 %v max %v; %d waiting at the hang: p50 %v p90 %v max %v\n", len(all), q(all, .5), q(all, .99), q(all, 1), len(span), q(span, .5), q(span, .9), q(span, 1))
}

func q(d []time.Duration, f float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(f*float64(len(d))))].Round(100 * time.Microsecond)
}
