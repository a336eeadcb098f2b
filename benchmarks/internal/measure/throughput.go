package measure

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/benchmarks/internal/systems"
)

// WarmupOps is the number of operations, spread over the workers (at
// least one each), run before a Throughput measurement starts: they open
// the clients' connections and load the systems' scripts.
const WarmupOps = 50

// Throughput is the result of one Throughput measurement.
type Throughput struct {
	// Workers is the number of goroutines.
	Workers int `json:"workers"`
	// Ops counts the successful acquire+release pairs.
	Ops int64 `json:"ops"`
	// Elapsed runs from the start until the last worker finished its last
	// operation (for workers that hung: until the end of the duration).
	Elapsed time.Duration `json:"elapsed_ns"`
	// OpsPerSec is Ops / Elapsed.
	OpsPerSec float64 `json:"ops_per_s"`
	// P50 and P99 are quantiles of the time of acquire plus release.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// AllocsPerOp and BytesPerOp are the process's heap allocations during
	// the measurement (runtime.MemStats Mallocs and TotalAlloc deltas)
	// divided by Ops.
	AllocsPerOp float64 `json:"allocs_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	// Errors counts failed acquisitions or releases; FirstError is the
	// first of them.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Hung counts workers whose operation was still running hangGrace
	// after the end of the duration, and was ended by closing the
	// instance; their last operations count nowhere else.
	Hung int `json:"hung,omitempty"`
}

// Warmup runs ops acquire+release operations on inst, spread over workers
// goroutines (at least one each) on keys of their own that start with
// prefix, and returns the first error. wd aborts it when it takes more than
// hangGrace.
func Warmup(wd Watchdog, inst systems.Instance, workers, ops int, prefix string) error {
	ctx := context.Background()
	per := max(1, (ops+workers-1)/workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	var aborted atomic.Bool
	for i := range workers {
		wg.Go(func() {
			keys := newKeyRing(prefix, i, per)
			for range per {
				h, err := inst.Acquire(ctx, keys.key())
				if err == nil {
					err = h.Release(ctx)
				}
				if err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	didAbort, finished := wd.watch(&wg, hangGrace, &aborted)
	switch {
	case !finished:
		return fmt.Errorf("warm-up: operations hung for %v, and still did not return %v after the instances were closed", hangGrace, abortGrace)
	case didAbort && wd.Stop != nil && wd.Stop.Err() != nil:
		return fmt.Errorf("warm-up: interrupted: %w", wd.Stop.Err())
	case didAbort:
		return fmt.Errorf("warm-up: operations hung for %v; the instances were closed to end them", hangGrace)
	}
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// worker is the state of one goroutine of a Throughput measurement.
type worker struct {
	keys     *keyRing
	hist     histogram
	ops      int64
	errs     int64
	firstErr error
	end      time.Time // when it stopped, unless it hung
}

// RunThroughput runs workers goroutines, each acquiring and releasing a
// fresh key of its own on inst (keys start with prefix), for d, after a
// warm-up of WarmupOps operations. Operations still running hangGrace
// after d are aborted through wd, and counted in Hung. It returns an error
// when the warm-up fails or operations did not return even after the
// abort.
func RunThroughput(wd Watchdog, inst systems.Instance, workers int, d time.Duration, prefix string) (Throughput, error) {
	ctx := context.Background()
	// Room for 60,000 operations per second of d in all, and 1,000 more per
	// worker; a worker that goes past that reuses its first keys.
	perWorker := int(d.Seconds()*60_000)/workers + 1_000
	ws := make([]*worker, workers)
	for i := range ws {
		ws[i] = &worker{keys: newKeyRing(prefix, i, perWorker)}
	}

	if err := Warmup(wd, inst, workers, WarmupOps, prefix+"warm:"); err != nil {
		return Throughput{}, err
	}

	begin := make(chan struct{})
	var ready, done sync.WaitGroup
	var deadline time.Time
	var aborted atomic.Bool
	var stopped atomic.Int64 // workers that ended normally
	for _, w := range ws {
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-begin
			for {
				start := time.Now()
				if !start.Before(deadline) {
					w.end = start
					stopped.Add(1)
					return
				}
				h, err := inst.Acquire(ctx, w.keys.key())
				if err == nil {
					err = h.Release(ctx)
				}
				lat := time.Since(start)
				if aborted.Load() {
					return // hung, and ended by the abort
				}
				if err != nil {
					if w.errs++; w.firstErr == nil {
						w.firstErr = err
					}
					continue
				}
				w.hist.record(lat)
				w.ops++
			}
		})
	}
	ready.Wait()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	deadline = t0.Add(d)
	close(begin)
	didAbort, finished := wd.watch(&done, d+hangGrace, &aborted)
	runtime.ReadMemStats(&after)
	if !finished {
		return Throughput{}, fmt.Errorf("operations hung, and still did not return %v after the instances were closed", abortGrace)
	}

	res := Throughput{Workers: workers}
	if didAbort {
		res.Hung = workers - int(stopped.Load())
	}
	var all histogram
	end := deadline
	for _, w := range ws {
		all.merge(&w.hist)
		res.Ops += w.ops
		res.Errors += w.errs
		if w.firstErr != nil && res.FirstError == "" {
			res.FirstError = w.firstErr.Error()
		}
		if w.end.After(end) {
			end = w.end
		}
	}
	res.Elapsed = end.Sub(t0)
	res.OpsPerSec = float64(res.Ops) / res.Elapsed.Seconds()
	res.P50 = all.quantile(0.50)
	res.P99 = all.quantile(0.99)
	if res.Ops > 0 {
		res.AllocsPerOp = float64(after.Mallocs-before.Mallocs) / float64(res.Ops)
		res.BytesPerOp = float64(after.TotalAlloc-before.TotalAlloc) / float64(res.Ops)
	}
	return res, nil
}
