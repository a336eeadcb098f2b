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

// DegradedWarmup is how long the warm-up of a degraded measurement runs
// (WarmupFor), after the fault and before the clock starts, so that the
// system has noticed the failed server.
const DegradedWarmup = 200 * time.Millisecond

// DegradedOpTimeout bounds each acquire and each release of a degraded
// measurement (and of its warm-up), through the context it is given: a
// system that waits on a hung server must not hang the measurement. It is
// well below hangGrace, so that such operations end as failures rather
// than being aborted.
const DegradedOpTimeout = time.Second

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
	// AcquireP50 and AcquireP99 are quantiles of the time of the acquire
	// alone, over the same operations.
	AcquireP50 time.Duration `json:"acquire_p50_ns"`
	AcquireP99 time.Duration `json:"acquire_p99_ns"`
	// AllocsPerOp and BytesPerOp are the process's heap allocations during
	// the measurement (runtime.MemStats Mallocs and TotalAlloc deltas)
	// divided by Ops.
	AllocsPerOp float64 `json:"allocs_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	// OpTimeout is the bound of each acquire and each release (0: none,
	// context.Background()).
	OpTimeout time.Duration `json:"op_timeout_ns,omitempty"`
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

// WarmupFor runs acquire+release operations on inst for d, from workers
// goroutines on keys of their own that start with prefix, each acquire and
// each release bounded by opTimeout; failures are expected (the degraded
// modes run it after the fault) and only counted. It returns the
// operations that succeeded and those that failed, and an error when wd
// had to abort it.
func WarmupFor(wd Watchdog, inst systems.Instance, workers int, d, opTimeout time.Duration, prefix string) (ok, failed int64, err error) {
	var (
		wg              sync.WaitGroup
		aborted         atomic.Bool
		okOps, failures atomic.Int64
	)
	end := time.Now().Add(d)
	for i := range workers {
		wg.Go(func() {
			keys := newKeyRing(prefix, i, 4096)
			for time.Now().Before(end) {
				_, err := boundedOp(inst, keys.key(), opTimeout)
				if aborted.Load() {
					return
				}
				if err != nil {
					failures.Add(1)
				} else {
					okOps.Add(1)
				}
			}
		})
	}
	didAbort, finished := wd.watch(&wg, d+2*opTimeout+hangGrace, &aborted)
	switch {
	case !finished:
		err = fmt.Errorf("warm-up: operations hung, and still did not return %v after the instances were closed", abortGrace)
	case didAbort && wd.Stop != nil && wd.Stop.Err() != nil:
		err = fmt.Errorf("warm-up: interrupted: %w", wd.Stop.Err())
	case didAbort:
		err = fmt.Errorf("warm-up: operations ran %v past their bound of %v; the instances were closed to end them", hangGrace, opTimeout)
	}
	return okOps.Load(), failures.Load(), err
}

// boundedOp acquires key on inst and releases it, each step under a
// context of its own bounded by opTimeout, and returns how long the
// acquire took.
func boundedOp(inst systems.Instance, key string, opTimeout time.Duration) (time.Duration, error) {
	start := time.Now()
	actx, acancel := context.WithTimeout(context.Background(), opTimeout)
	defer acancel()
	h, err := inst.Acquire(actx, key)
	acq := time.Since(start)
	if err != nil {
		return acq, err
	}
	rctx, rcancel := context.WithTimeout(context.Background(), opTimeout)
	defer rcancel()
	return acq, h.Release(rctx)
}

// worker is the state of one goroutine of a Throughput measurement.
type worker struct {
	keys     *keyRing
	hist     histogram // acquire plus release
	acqHist  histogram // acquire
	ops      int64
	errs     int64
	firstErr error
	end      time.Time // when it stopped, unless it hung
}

// throughputRun is what the workers of one Throughput measurement share.
type throughputRun struct {
	inst      systems.Instance
	opTimeout time.Duration // 0: operations under context.Background()
	deadline  time.Time     // set before the workers begin
	aborted   atomic.Bool
	stopped   atomic.Int64 // workers that ended normally
}

// RunThroughput runs workers goroutines, each acquiring and releasing a
// fresh key of its own on inst (keys start with prefix), for d, after a
// warm-up. With opTimeout 0, operations run under context.Background() and
// the warm-up is WarmupOps operations, any failure of which is an error.
// With opTimeout (the degraded modes), each acquire and each release runs
// under a context bounded by opTimeout, and the warm-up is WarmupFor
// DegradedWarmup, whose failures are expected. Operations still running
// hangGrace after d are aborted through wd, and counted in Hung. It
// returns an error when the warm-up fails or operations did not return
// even after the abort.
func RunThroughput(wd Watchdog, inst systems.Instance, workers int, d, opTimeout time.Duration, prefix string) (Throughput, error) {
	// Room for 60,000 operations per second of d in all, and 1,000 more per
	// worker; a worker that goes past that reuses its first keys.
	perWorker := int(d.Seconds()*60_000)/workers + 1_000
	ws := make([]*worker, workers)
	for i := range ws {
		ws[i] = &worker{keys: newKeyRing(prefix, i, perWorker)}
	}
	if err := throughputWarmup(wd, inst, workers, opTimeout, prefix+"warm:"); err != nil {
		return Throughput{}, err
	}

	r := &throughputRun{inst: inst, opTimeout: opTimeout}
	begin := make(chan struct{})
	var ready, done sync.WaitGroup
	for _, w := range ws {
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-begin
			r.loop(w)
		})
	}
	ready.Wait()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	r.deadline = t0.Add(d)
	close(begin)
	didAbort, finished := wd.watch(&done, d+hangGrace, &r.aborted)
	runtime.ReadMemStats(&after)
	if !finished {
		return Throughput{}, fmt.Errorf("operations hung, and still did not return %v after the instances were closed", abortGrace)
	}

	res := summariseWorkers(ws, t0, r.deadline)
	res.OpTimeout = opTimeout
	if didAbort {
		res.Hung = workers - int(r.stopped.Load())
	}
	if res.Ops > 0 {
		res.AllocsPerOp = float64(after.Mallocs-before.Mallocs) / float64(res.Ops)
		res.BytesPerOp = float64(after.TotalAlloc-before.TotalAlloc) / float64(res.Ops)
	}
	return res, nil
}

// throughputWarmup runs the warm-up of a Throughput measurement: WarmupOps
// operations when opTimeout is 0, any failure of which is an error; else
// WarmupFor DegradedWarmup, whose failures are expected.
func throughputWarmup(wd Watchdog, inst systems.Instance, workers int, opTimeout time.Duration, prefix string) error {
	if opTimeout > 0 {
		_, _, err := WarmupFor(wd, inst, workers, DegradedWarmup, opTimeout, prefix)
		return err
	}
	return Warmup(wd, inst, workers, WarmupOps, prefix)
}

// loop is one worker's measurement: acquire and release fresh keys until
// the deadline, recording the latency of each operation that succeeded
// and counting those that failed. It returns at once, recording nothing
// more, when its operation returns after the watchdog aborted the run.
func (r *throughputRun) loop(w *worker) {
	ctx := context.Background()
	for {
		start := time.Now()
		if !start.Before(r.deadline) {
			w.end = start
			r.stopped.Add(1)
			return
		}
		var acq time.Duration
		var err error
		if r.opTimeout > 0 {
			acq, err = boundedOp(r.inst, w.keys.key(), r.opTimeout)
		} else {
			var h systems.Held
			h, err = r.inst.Acquire(ctx, w.keys.key())
			acq = time.Since(start)
			if err == nil {
				err = h.Release(ctx)
			}
		}
		lat := time.Since(start)
		if r.aborted.Load() {
			return // hung, and ended by the abort
		}
		if err != nil {
			if w.errs++; w.firstErr == nil {
				w.firstErr = err
			}
			continue
		}
		w.hist.record(lat)
		w.acqHist.record(acq)
		w.ops++
	}
}

// summariseWorkers merges the workers' records of a measurement that
// started at t0 and ran until deadline (or until the last worker's end,
// when later) into a Throughput: its counts, rate and latencies.
func summariseWorkers(ws []*worker, t0, deadline time.Time) Throughput {
	res := Throughput{Workers: len(ws)}
	var all, acq histogram
	end := deadline
	for _, w := range ws {
		all.merge(&w.hist)
		acq.merge(&w.acqHist)
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
	res.AcquireP50 = acq.quantile(0.50)
	res.AcquireP99 = acq.quantile(0.99)
	return res
}
