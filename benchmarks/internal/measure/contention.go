package measure

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/benchmarks/internal/systems"
)

// AcquireTimeout bounds each acquisition of a contended measurement.
const AcquireTimeout = 30 * time.Second

// releaseTimeout bounds each release of a healthy contended measurement.
const releaseTimeout = 10 * time.Second

// Contention is the result of one Contention measurement.
type Contention struct {
	// Goroutines is the number of contenders.
	Goroutines int `json:"goroutines"`
	// Window is the measured time: acquisitions that returned within it
	// count in AcqPerSec.
	Window time.Duration `json:"window_ns"`
	// Acquisitions counts those granted within the window; Late those
	// granted while the contenders stopped (they are released, and
	// checked and timed like the others).
	Acquisitions int64   `json:"acquisitions"`
	Late         int64   `json:"late"`
	AcqPerSec    float64 `json:"acq_per_s"`
	// Failures counts acquisitions that returned an error before the end
	// of the window (acquisitions cancelled by the end are not failures);
	// ReleaseErrors counts releases that returned an error.
	Failures      int64 `json:"failures"`
	ReleaseErrors int64 `json:"release_errors"`
	// Violations counts acquisitions that returned while another
	// contender held the lock.
	Violations int64 `json:"violations"`
	// HandoffP50 and HandoffP99 are quantiles of the time from the return
	// of release k to the return of acquisition k+1 (negative when k+1
	// returned before release k did).
	HandoffP50 time.Duration `json:"handoff_p50_ns"`
	HandoffP99 time.Duration `json:"handoff_p99_ns"`
	// WaitP50, WaitP99 and WaitMax describe how long Acquire took for the
	// acquisitions that took the lock over from another contender; Waits
	// counts those.
	WaitP50 time.Duration `json:"wait_p50_ns"`
	WaitP99 time.Duration `json:"wait_p99_ns"`
	WaitMax time.Duration `json:"wait_max_ns"`
	Waits   int64         `json:"waits"`
	// ReleaserShare is the fraction of acquisitions whose holder also held
	// the lock just before.
	ReleaserShare float64 `json:"releaser_share"`
	// FirstError and FirstReleaseError are the first failure of each kind.
	FirstError        string `json:"first_error,omitempty"`
	FirstReleaseError string `json:"first_release_error,omitempty"`
	// Hung counts contenders still inside an acquire or a release
	// the release bound plus hangGrace after the window, ended by closing the
	// instances; their last operations count nowhere else.
	Hung int `json:"hung,omitempty"`
}

// acquisition is one granted lock: who held it, and when (since the start
// of the measurement) its Acquire began and returned and its Release
// returned.
type acquisition struct {
	seq                      int64
	holder                   int
	acqStart, acqEnd, relEnd time.Duration
}

// contender is the state of one goroutine of a Contention measurement.
type contender struct {
	acqs                  []acquisition
	failures, relErrs     int64
	firstErr, firstRelErr error
}

// contentionRun is what the contenders of one Contention measurement
// share.
type contentionRun struct {
	ctx        context.Context // ends with the window
	relTimeout time.Duration
	t0         time.Time // the start, set before the contenders begin
	inside     atomic.Int32
	seq        atomic.Int64
	violations atomic.Int64
	aborted    atomic.Bool
	stopped    atomic.Int64 // goroutines that ended normally
}

// RunContention runs one goroutine per Acquirer, all on one key, for d:
// each loops acquire (bounded by AcquireTimeout) → critical section (no
// work) → release (bounded by relTimeout, or releaseTimeout when it is 0;
// the degraded modes pass DegradedOpTimeout). When d has passed,
// acquisitions still waiting are cancelled and the goroutines stop after
// their current release. wd.Stop ending stops the measurement early;
// goroutines still running the release bound plus hangGrace after d are
// aborted through wd and counted in Hung. It returns an error when they
// did not return even after the abort.
func RunContention(wd Watchdog, acquirers []systems.Acquirer, d, relTimeout time.Duration) (Contention, error) {
	if relTimeout <= 0 {
		relTimeout = releaseTimeout
	}
	parent := wd.Stop
	if parent == nil {
		parent = context.Background()
	}
	runCtx, stop := context.WithCancel(parent)
	defer stop()
	r := &contentionRun{ctx: runCtx, relTimeout: relTimeout}
	cs := make([]*contender, len(acquirers))
	begin := make(chan struct{})
	var ready, done sync.WaitGroup
	for i, a := range acquirers {
		c := &contender{acqs: make([]acquisition, 0, 1024)}
		cs[i] = c
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-begin
			r.contend(c, i, a)
		})
	}
	ready.Wait()
	r.t0 = time.Now()
	timer := time.AfterFunc(d, stop)
	close(begin)
	// An interrupt ends the window through runCtx: only a hang aborts.
	didAbort, finished := Watchdog{Abort: wd.Abort}.watch(&done, d+relTimeout+hangGrace, &r.aborted)
	timer.Stop()
	if !finished {
		return Contention{}, fmt.Errorf("contenders hung, and still did not return %v after the instances were closed", abortGrace)
	}
	window := d
	if parent.Err() != nil {
		window = min(d, time.Since(r.t0))
	}
	res := summarise(cs, window, r.violations.Load())
	if didAbort {
		res.Hung = len(acquirers) - int(r.stopped.Load())
	}
	return res, nil
}

// contend is contender c, number holder, taking the lock through a until
// the window ends or the watchdog aborts the run.
func (r *contentionRun) contend(c *contender, holder int, a systems.Acquirer) {
	defer func() {
		if !r.aborted.Load() {
			r.stopped.Add(1)
		}
	}()
	for r.ctx.Err() == nil {
		if !r.cycle(c, holder, a) {
			return
		}
	}
}

// cycle is one acquire → critical section → release of contender c,
// recorded in c. It returns false when the contender must stop: the window
// ended while it waited, or the watchdog aborted the run.
func (r *contentionRun) cycle(c *contender, holder int, a systems.Acquirer) bool {
	actx, acancel := context.WithTimeout(r.ctx, AcquireTimeout)
	defer acancel()
	acqStart := time.Since(r.t0)
	h, err := a.Acquire(actx)
	acqEnd := time.Since(r.t0)
	if r.aborted.Load() {
		return false
	}
	if err != nil {
		if r.ctx.Err() != nil {
			return false // cancelled by the end of the window
		}
		if c.failures++; c.firstErr == nil {
			c.firstErr = err
		}
		return true
	}
	n := r.criticalSection()
	rctx, rcancel := context.WithTimeout(context.Background(), r.relTimeout)
	rerr := h.Release(rctx)
	relEnd := time.Since(r.t0)
	rcancel()
	if r.aborted.Load() {
		return false
	}
	if rerr != nil {
		if c.relErrs++; c.firstRelErr == nil {
			c.firstRelErr = rerr
		}
	}
	c.acqs = append(c.acqs, acquisition{seq: n, holder: holder, acqStart: acqStart, acqEnd: acqEnd, relEnd: relEnd})
	return true
}

// criticalSection does no work under the lock: it counts a violation when
// another contender is inside too, and returns the acquisition's sequence
// number.
func (r *contentionRun) criticalSection() int64 {
	mine := r.inside.CompareAndSwap(0, 1)
	if !mine {
		r.violations.Add(1)
	}
	n := r.seq.Add(1) - 1
	if mine {
		r.inside.Store(0)
	}
	return n
}

// summarise computes a Contention from the contenders' records.
func summarise(cs []*contender, window time.Duration, violations int64) Contention {
	res := Contention{Goroutines: len(cs), Window: window, Violations: violations}
	var all []acquisition
	for _, c := range cs {
		all = append(all, c.acqs...)
		res.Failures += c.failures
		res.ReleaseErrors += c.relErrs
		if c.firstErr != nil && res.FirstError == "" {
			res.FirstError = c.firstErr.Error()
		}
		if c.firstRelErr != nil && res.FirstReleaseError == "" {
			res.FirstReleaseError = c.firstRelErr.Error()
		}
	}
	slices.SortFunc(all, func(a, b acquisition) int { return int(a.seq - b.seq) })
	for _, a := range all {
		if a.acqEnd <= window {
			res.Acquisitions++
		} else {
			res.Late++
		}
	}
	res.AcqPerSec = float64(res.Acquisitions) / window.Seconds()
	if len(all) < 2 {
		return res
	}
	handoffs := make([]time.Duration, 0, len(all)-1)
	var waits []time.Duration
	same := 0
	for k := 1; k < len(all); k++ {
		prev, cur := all[k-1], all[k]
		handoffs = append(handoffs, cur.acqEnd-prev.relEnd)
		if cur.holder == prev.holder {
			same++
		} else {
			waits = append(waits, cur.acqEnd-cur.acqStart)
		}
	}
	slices.Sort(handoffs)
	slices.Sort(waits)
	res.HandoffP50 = quantileOf(handoffs, 0.50)
	res.HandoffP99 = quantileOf(handoffs, 0.99)
	res.Waits = int64(len(waits))
	res.WaitP50 = quantileOf(waits, 0.50)
	res.WaitP99 = quantileOf(waits, 0.99)
	if len(waits) > 0 {
		res.WaitMax = waits[len(waits)-1]
	}
	res.ReleaserShare = float64(same) / float64(len(all)-1)
	return res
}
