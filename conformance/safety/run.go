package safety

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// Workload is what the clients of a run ask for and do under lock.
type Workload string

// The workloads.
const (
	// MutexWorkload: each client takes one key's plain lock (Acquire) and
	// does a read-modify-write of its register.
	MutexWorkload Workload = "mutex"
	// ReadWriteWorkload: on one key at a time, three clients in four are
	// readers (AcquireShared) that read the key's register at the start
	// and at the end of their section, and the others writers (Acquire)
	// that do a read-modify-write of it. No reader may overlap a writer;
	// readers may overlap each other.
	ReadWriteWorkload Workload = "rw"
	// MultiKeyWorkload: each client takes a random set of one to three of
	// the keys, given in a random order (AcquireAll; Acquire for one key),
	// and does a read-modify-write of each key's register. No two holders
	// of overlapping sets may overlap.
	MultiKeyWorkload Workload = "multi"
	// SemaphoreWorkload: each client takes one of Config.Permits permits
	// of a key (AcquirePermit) and, inside, increments a counter of the
	// key's holders on the registers' server, which must never read more
	// than Permits, and decrements it on the way out.
	SemaphoreWorkload Workload = "semaphore"
)

// Workloads are every workload, in a fixed order.
var Workloads = []Workload{MutexWorkload, ReadWriteWorkload, MultiKeyWorkload, SemaphoreWorkload}

// Config is one safety run.
type Config struct {
	Seed     int64
	Workload Workload      // default MutexWorkload
	Duration time.Duration // how long the clients run; default 8 s
	Nodes    int           // default 5
	Clients  int           // each with its own Locker; default 16
	Keys     int           // keys the clients share; default 3, and 4 for MultiKeyWorkload
	Permits  int           // each key's permits under SemaphoreWorkload; default 2
	// TTL and NodeTimeout of every Locker; defaults 1 s and 50 ms.
	TTL         time.Duration
	NodeTimeout time.Duration
	Kinds       []FaultKind   // default AllFaults
	Fencing     bool          // record tokens and check that they grow
	Options     []core.Option // more options for every Locker
	// NewNode makes a node of the backend under test for a proxy's
	// address (required); the run closes its client after its Locker.
	NewNode redistest.NodeFactory
	// Logf, when set, receives the schedule and each fault as injected.
	Logf func(format string, args ...any)
	// HistoryDir is where porcupine's visualisation of a history that is
	// not linearizable is written (the violation names the file); default
	// os.TempDir().
	HistoryDir string
}

// Report is what a safety run saw.
type Report struct {
	Seed         int64
	Workload     Workload
	Acquisitions int            // locks granted
	Failures     map[string]int // acquisitions that failed, by core.Reason
	Sections     int            // critical sections recorded
	Readers      int            // of those, under shared locks
	MostReaders  int            // the most shared sections of one key that overlapped at once
	Sets         int            // sections under multi-key locks of two keys or more
	LockOps      int            // lock operations checked by porcupine
	RegisterOps  int            // register read-modify-writes checked by porcupine
	Stalls       int            // holders stalled by ClientPause
	Noticed      int            // of those, the ones that found their lock unsafe before use
	Unused       int            // locks granted with too little validity left to use (not stalled)
	Faults       map[FaultKind]int
	Violations   []Violation
	// LeftAtEnd counts lock keys on the servers right after every client
	// released and every fault healed; LeftAfterTTL counts them once the
	// TTL has passed since (0 unless a key outlives its TTL).
	LeftAtEnd    int
	LeftAfterTTL int
	Slowest      time.Duration // the slowest successful acquisition
	Elapsed      time.Duration
}

// String is the report in one line.
func (r *Report) String() string {
	var faults []string
	for _, k := range AllFaults {
		if n := r.Faults[k]; n > 0 {
			faults = append(faults, fmt.Sprintf("%s=%d", k, n))
		}
	}
	var fails []string
	for _, k := range slices.Sorted(maps.Keys(r.Failures)) {
		fails = append(fails, fmt.Sprintf("%s=%d", k, r.Failures[k]))
	}
	if len(fails) == 0 {
		fails = []string{"none"}
	}
	var kinds string
	switch {
	case r.Readers > 0:
		kinds = fmt.Sprintf(" (%d shared, at most %d at once)", r.Readers, r.MostReaders)
	case r.Sets > 0:
		kinds = fmt.Sprintf(" (%d of sets)", r.Sets)
	}
	return fmt.Sprintf("%s seed %d: %d acquisitions (failed: %s), %d sections%s, %d lock and %d register operations, %d/%d stalls noticed, %d unused, faults: %s, violations %d, locks left %d at end / %d after TTL, slowest acquisition %v, in %v",
		r.Workload, r.Seed, r.Acquisitions, strings.Join(fails, " "), r.Sections, kinds, r.LockOps, r.RegisterOps, r.Noticed, r.Stalls, r.Unused, strings.Join(faults, " "),
		len(r.Violations), r.LeftAtEnd, r.LeftAfterTTL, r.Slowest.Round(time.Millisecond), r.Elapsed.Round(time.Millisecond))
}

func (c *Config) defaults() error {
	if c.NewNode == nil {
		return errors.New("safety: Config.NewNode is nil")
	}
	if c.Duration <= 0 {
		c.Duration = 8 * time.Second
	}
	if c.Nodes <= 0 {
		c.Nodes = 5
	}
	if c.Clients <= 0 {
		c.Clients = 16
	}
	switch c.Workload {
	case "":
		c.Workload = MutexWorkload
	case MutexWorkload, MultiKeyWorkload:
	case ReadWriteWorkload, SemaphoreWorkload:
		if c.Clients > MaxReaders {
			return fmt.Errorf("safety: the %s workload takes at most %d clients, not %d", c.Workload, MaxReaders, c.Clients)
		}
	default:
		return fmt.Errorf("safety: unknown workload %q (want one of %v)", c.Workload, Workloads)
	}
	if c.Keys <= 0 {
		c.Keys = 3
		if c.Workload == MultiKeyWorkload {
			c.Keys = 4
		}
	}
	if c.Permits <= 0 {
		c.Permits = 2
	}
	if c.TTL <= 0 {
		c.TTL = time.Second
	}
	if c.NodeTimeout <= 0 {
		c.NodeTimeout = 50 * time.Millisecond
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.HistoryDir == "" {
		c.HistoryDir = os.TempDir()
	}
	return nil
}

// minUse is the validity a holder needs left to use the resource: its
// work (up to maxWork) and a wide margin for a starved scheduler.
const (
	maxWork = 3 * time.Millisecond
	minUse  = 200 * time.Millisecond
)

// Run runs cfg.Clients clients, each with its own Locker over the nodes of
// a fresh Rig, acquiring cfg.Keys keys for cfg.Duration while the faults
// of Schedule(cfg.Seed) are injected; then it heals everything, checks the
// history and counts the keys left.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rig, err := StartRig(ctx, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	rep, err := RunOn(ctx, rig, cfg)
	if cerr := rig.Close(); cerr != nil && err == nil { // a link left open is a leak
		return nil, fmt.Errorf("safety: closing the rig: %w", cerr)
	}
	return rep, err
}

// RunOn is Run on a Rig the caller started (every server running, no
// fault set); it leaves the rig healed.
func RunOn(ctx context.Context, rig *Rig, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	quorum := cfg.Nodes/2 + 1
	faults := Schedule(ScheduleConfig{Seed: cfg.Seed, Duration: cfg.Duration, Nodes: cfg.Nodes, Clients: cfg.Clients,
		MaxFaulty: cfg.Nodes - quorum, TTL: cfg.TTL, NodeTimeout: cfg.NodeTimeout, Kinds: cfg.Kinds})
	for _, f := range faults {
		cfg.Logf("scheduled %v", f)
	}
	regs, err := StartRegisters(ctx)
	if err != nil {
		return nil, err
	}
	defer regs.Close()
	lockers, closeLockers, err := clientLockers(rig, cfg)
	if err != nil {
		return nil, err
	}
	defer closeLockers()

	prefix := fmt.Sprintf("safety:%d:%d:", cfg.Seed, start.UnixNano())
	s := &runState{cfg: cfg, hist: NewHistory(), regs: regs, stalls: make([]atomic.Int64, cfg.Clients),
		rep: &Report{Seed: cfg.Seed, Workload: cfg.Workload, Failures: map[string]int{}, Faults: map[FaultKind]int{}}}
	for i := range cfg.Keys {
		s.keys = append(s.keys, fmt.Sprintf("%sk%d", prefix, i))
	}
	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var faultWG sync.WaitGroup
	faultWG.Go(func() { s.injectFaults(ctx, runCtx, rig, faults, &faultWG) })
	var clients sync.WaitGroup
	for c, l := range lockers {
		clients.Go(func() { s.client(ctx, runCtx, c, l) })
	}
	clients.Wait()
	for _, l := range lockers {
		_ = l.Close()
	}
	faultWG.Wait()
	if err := errors.Join(s.faultErrs...); err != nil {
		return nil, fmt.Errorf("safety: injecting faults: %w", err)
	}
	if err := errors.Join(s.regErrs...); err != nil {
		return nil, fmt.Errorf("safety: using the registers: %w", err)
	}
	rep := s.rep
	if err := checkRun(s.hist, cfg, rep, start); err != nil {
		return nil, err
	}
	if rep.LeftAtEnd, rep.LeftAfterTTL, err = leftKeys(ctx, rig, prefix, cfg.TTL); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// clientLockers makes each client's Locker, over its own proxies to the
// rig's servers (for the majorities ring), with cfg's options. closeAll
// closes the Lockers, then their nodes' clients; on an error, what was made
// is closed already.
func clientLockers(rig *Rig, cfg Config) (lockers []*core.Locker, closeAll func(), err error) {
	var closeClients []func() error
	lockers = make([]*core.Locker, cfg.Clients)
	closeAll = func() {
		for _, l := range lockers { // before the clients
			if l != nil {
				_ = l.Close()
			}
		}
		for _, c := range closeClients {
			_ = c()
		}
	}
	opts := append([]core.Option{core.WithTTL(cfg.TTL), core.WithNodeTimeout(cfg.NodeTimeout)}, cfg.Options...)
	if cfg.Fencing {
		opts = append(opts, core.WithFencing(true))
	}
	for c := range lockers {
		addrs, err := rig.ClientAddrs(c)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		nodes := make([]core.Node, cfg.Nodes)
		for i, addr := range addrs {
			n, closeClient, err := cfg.NewNode(addr)
			if closeClient != nil {
				closeClients = append(closeClients, closeClient)
			}
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("safety: node for %s: %w", addr, err)
			}
			nodes[i] = n
		}
		if lockers[c], err = core.New(nodes, opts...); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	return lockers, closeAll, nil
}

// runState is what a run's clients and its fault injection share.
type runState struct {
	cfg    Config
	hist   *History
	regs   *Registers
	keys   []string
	stalls []atomic.Int64 // per client: the next stall, in ns

	mu        sync.Mutex // guards rep, faultErrs and regErrs while the run goes on
	rep       *Report
	faultErrs []error
	regErrs   []error
}

// injectFaults injects each fault at its time until runCtx ends, each on
// a goroutine of wg's that heals it after its duration (even once the
// clients have stopped). A ClientPause is left for its client to take.
func (s *runState) injectFaults(ctx, runCtx context.Context, rig *Rig, faults []Fault, wg *sync.WaitGroup) {
	for _, f := range faults {
		if waitCtx(runCtx, f.At-s.hist.Now()) != nil {
			return
		}
		if f.Kind == ClientPause {
			s.stalls[f.Target].Store(int64(f.Duration))
		}
		s.mu.Lock()
		s.rep.Faults[f.Kind]++
		s.mu.Unlock()
		s.cfg.Logf("inject %v", f)
		wg.Go(func() {
			if err := inject(ctx, rig, f); err != nil {
				s.mu.Lock()
				s.faultErrs = append(s.faultErrs, fmt.Errorf("%v: %w", f, err))
				s.mu.Unlock()
			}
		})
	}
}

// client is client c's loop until runCtx ends: acquire what the workload
// picks through l, take its pending stall if any, use the lock if it is
// still safe with room for the work, release it, and count it.
func (s *runState) client(ctx, runCtx context.Context, c int, l *core.Locker) {
	rng := rand.New(rand.NewPCG(uint64(s.cfg.Seed), uint64(c)))
	h := &holder{client: c, ttl: s.cfg.TTL, hist: s.hist, regs: s.regs, rng: rng}
	if s.cfg.Workload == SemaphoreWorkload {
		h.permits = s.cfg.Permits
	}
	for runCtx.Err() == nil {
		lock, validUntil, took := s.acquire(runCtx, c, l, s.pick(rng))
		if lock == nil {
			continue
		}
		stalled := false
		if d := s.stalls[c].Swap(0); d > 0 {
			time.Sleep(time.Duration(d)) // the injected stall itself
			stalled = true
		}
		// Before using the resource: is the lock still safe, with room for
		// the work?
		use := lock.Err() == nil && lock.Validity() >= minUse
		var regErr error
		if use {
			regErr = h.use(ctx, lock, validUntil)
		}
		h.release(ctx, lock)
		s.count(took, stalled, use, regErr)
	}
}

// request is what a client asks for: a lock on keys (a multi-key lock
// when there are two or more), shared or not, or with permits a permit
// of a semaphore.
type request struct {
	keys    []string
	shared  bool
	permits int
}

// pick draws the next request of the run's workload from rng.
func (s *runState) pick(rng *rand.Rand) request {
	switch s.cfg.Workload {
	case ReadWriteWorkload:
		return request{keys: []string{s.keys[rng.IntN(len(s.keys))]}, shared: rng.IntN(4) != 0}
	case MultiKeyWorkload:
		n := 1 + rng.IntN(min(3, len(s.keys)))
		perm := rng.Perm(len(s.keys))[:n] // in a random order: the Locker sorts them
		keys := make([]string, n)
		for i, k := range perm {
			keys[i] = s.keys[k]
		}
		return request{keys: keys}
	case SemaphoreWorkload:
		return request{keys: []string{s.keys[rng.IntN(len(s.keys))]}, permits: s.cfg.Permits}
	}
	return request{keys: []string{s.keys[rng.IntN(len(s.keys))]}}
}

// lock takes r's lock through l: AcquireAll for a set, AcquireShared for
// a shared lock, AcquirePermit for a permit, else Acquire.
func (r request) lock(ctx context.Context, l *core.Locker) (*core.Lock, error) {
	switch {
	case r.permits > 0:
		return l.AcquirePermit(ctx, r.keys[0], r.permits)
	case len(r.keys) > 1:
		return l.AcquireAll(ctx, r.keys...)
	case r.shared:
		return l.AcquireShared(ctx, r.keys[0])
	}
	return l.Acquire(ctx, r.keys[0])
}

// acquire has client c take r's lock through l, within twice the TTL, and
// records the operation. It returns the lock, the end of its validity and
// how long it took, on the history's clock; or a nil lock, counting the
// failure while the run goes on.
func (s *runState) acquire(runCtx context.Context, c int, l *core.Locker, r request) (*core.Lock, time.Duration, time.Duration) {
	actx, cancel := context.WithTimeout(runCtx, 2*s.cfg.TTL)
	t0 := s.hist.Now()
	lock, err := r.lock(actx, l)
	took := s.hist.Now() - t0
	cancel()
	keys := slices.Sorted(slices.Values(r.keys))
	op := LockOp{Client: c, Key: strings.Join(keys, ","), Keys: keys, Shared: r.shared, Permits: r.permits, Kind: Acquire,
		Call: t0, Return: t0 + took, Outcome: OutcomeOf(err)}
	if err != nil {
		s.hist.AddLockOp(op)
		if runCtx.Err() == nil {
			s.mu.Lock()
			s.rep.Failures[core.Reason(err)]++
			s.mu.Unlock()
		}
		return nil, 0, 0
	}
	// The end of the lock's validity, as the lock says right after it was
	// granted (the clock is read first, so the bound is never late): the
	// lock model's hold ends there at the latest.
	validUntil := s.hist.Now()
	validUntil += lock.Validity()
	op.ValidUntil = validUntil
	s.hist.AddLockOp(op)
	return lock, validUntil, took
}

// count adds a granted lock to the report: how long it took, whether its
// holder was stalled and whether it used it, and the registers' error.
func (s *runState) count(took time.Duration, stalled, use bool, regErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if regErr != nil {
		s.regErrs = append(s.regErrs, regErr)
	}
	s.rep.Acquisitions++
	s.rep.Slowest = max(s.rep.Slowest, took)
	switch {
	case stalled:
		s.rep.Stalls++
		if !use {
			s.rep.Noticed++
		}
	case !use:
		s.rep.Unused++
	}
}

// leftKeys counts the lock keys under prefix on the rig's servers now and
// again, polling, until none is left or the TTL (and a margin) has passed.
func leftKeys(ctx context.Context, rig *Rig, prefix string, ttl time.Duration) (atEnd, afterTTL int, err error) {
	if atEnd, err = rig.LockKeys(ctx, prefix); err != nil {
		return 0, 0, err
	}
	afterTTL = atEnd
	deadline := time.Now().Add(ttl + 2*time.Second)
	for afterTTL > 0 && time.Now().Before(deadline) {
		if err := waitCtx(ctx, 50*time.Millisecond); err != nil {
			return 0, 0, err
		}
		if afterTTL, err = rig.LockKeys(ctx, prefix); err != nil {
			return 0, 0, err
		}
	}
	return atEnd, afterTTL, nil
}

// work stands for the use of the protected resource: up to maxWork.
func work(rng *rand.Rand) {
	time.Sleep(time.Duration(rng.Int64N(int64(maxWork))))
}

func waitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
