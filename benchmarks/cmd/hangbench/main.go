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

// The scenario of one measurement: contenders on one key; the herald
// stopped after calm, for hang; the acquisitions reported, those begun
// from before to after the stop.
const (
	contenders = 16
	calm       = time.Second
	hang       = time.Second
	before     = 300 * time.Millisecond
	after      = 500 * time.Millisecond
)

func main() {
	iters := flag.Int("iters", 5, "measurements")
	flag.Parse()
	if err := run(context.Background(), *iters); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}

// run starts five redis-servers and makes iters measurements, printing
// each and then all of them together.
func run(ctx context.Context, iters int) error {
	var servers []*redistest.Server
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	var addrs []string
	for range 5 {
		s, err := redistest.StartServer(ctx)
		if err != nil {
			return err
		}
		servers, addrs = append(servers, s), append(addrs, s.Addr())
	}
	herald := servers[slices.Index(addrs, slices.Min(addrs))]
	var all, span []time.Duration
	for it := range iters {
		acqs, hung, err := measureHang(ctx, addrs, herald, fmt.Sprintf("hb:%d", it))
		if err != nil {
			return err
		}
		waits, spanning := aroundHang(acqs, hung)
		fmt.Printf("iter %d: %d acquisitions around the hang, p50 %v p99 %v max %v; %d waiting at the hang: p50 %v max %v\n", it, len(waits), q(waits, .5), q(waits, .99), q(waits, 1), len(spanning), q(spanning, .5), q(spanning, 1))
		all = append(all, waits...)
		span = append(span, spanning...)
		time.Sleep(200 * time.Millisecond)
	}
	slices.Sort(all)
	slices.Sort(span)
	fmt.Printf("all: %d acquisitions, p50 %v p99 %v max %v; %d waiting at the hang: p50 %v p90 %v max %v\n", len(all), q(all, .5), q(all, .99), q(all, 1), len(span), q(span, .5), q(span, .9), q(span, 1))
	return nil
}

// acquisition is when one Acquire began and returned with the lock.
type acquisition struct{ start, end time.Time }

// measureHang is one measurement on a fresh Locker over addrs: the
// contenders take key in turn, and after calm herald is stopped for hang.
// It returns the acquisitions, and when the herald was stopped.
func measureHang(ctx context.Context, addrs []string, herald *redistest.Server, key string) ([]acquisition, time.Time, error) {
	nodes, closeAll, err := redigo.Dial(addrs)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer func() { _ = closeAll() }()
	l, err := core.New(nodes)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer func() { _ = l.Close() }() // before closeAll: defers run last first

	var (
		mu   sync.Mutex
		acqs []acquisition
		wg   sync.WaitGroup
	)
	stop := make(chan struct{})
	for range contenders {
		wg.Go(func() {
			contend(ctx, l, key, stop, func(a acquisition) {
				mu.Lock()
				defer mu.Unlock()
				acqs = append(acqs, a)
			})
		})
	}
	time.Sleep(calm)
	hung := time.Now()
	err = herald.Pause()
	if err == nil {
		time.Sleep(hang)
	}
	close(stop)
	wg.Wait()
	_ = herald.Resume()
	return acqs, hung, err
}

// contend takes key in turn with the other contenders until stop is
// closed, passing each acquisition to record.
func contend(ctx context.Context, l *core.Locker, key string, stop <-chan struct{}, record func(acquisition)) {
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
		record(acquisition{start, end})
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = lock.Release(rctx)
		cancel()
	}
}

// aroundHang returns, sorted, the waits (Acquire's duration) of the
// acquisitions begun from before the stop of the herald at hung to after
// it, and those of the acquisitions waiting when it stopped.
func aroundHang(acqs []acquisition, hung time.Time) (waits, spanning []time.Duration) {
	for _, a := range acqs {
		if a.start.Before(hung) && a.end.After(hung) {
			spanning = append(spanning, a.end.Sub(a.start))
		}
		if a.start.After(hung.Add(-before)) && a.start.Before(hung.Add(after)) {
			waits = append(waits, a.end.Sub(a.start))
		}
	}
	slices.Sort(waits)
	slices.Sort(spanning)
	return waits, spanning
}

func q(d []time.Duration, f float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(f*float64(len(d))))].Round(100 * time.Microsecond)
}
