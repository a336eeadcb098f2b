package core_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
)

// TestModel is the model-based test of the lock's lifecycle (issue 15).
// Each seed makes a program: 2-4 Lockers, each configured differently
// (strategy, keep-alive, fencing, wake on release, node timeout), over 3
// or 5 shared memory nodes, with the restart guard on or off, and 20-60
// steps from the table modelOps. A step starts an operation in a goroutine
// of its own (Acquire, TryAcquire, AcquireAll and TryAcquireAll of a small
// set of the keys, AcquireShared and TryAcquireShared, Extend, KeepAlive,
// Release, Do, Close or Shutdown, KeepAlive racing Release or Close: the
// last five on locks of every kind), or injects a fault that
// heals after a while (stop and restart with or without data, pause,
// latency, lost replies, dropped pub/sub connections, refused
// subscriptions), so operations
// overlap each other and the faults. Everything runs in a synctest bubble:
// time is fake, so a program of several seconds costs milliseconds.
//
// After every step the world is checked against a small model that
// records who holds each key and when (world.check):
//
//  1. no conflicting holders at once: per key, one exclusive holder (a
//     mutex, a Do, or a set with the key) or any number of readers, each
//     counted from its acquisition's return to its release or the end of
//     its validity;
//  2. a lock that says it is held has its value on a quorum of nodes
//     (every key of a set; a reader in its key's readers set);
//  3. no stray value: a value on a node belongs to a lock not yet
//     released or to a call still running, unless its node is impaired,
//     or suspect to a Locker (its release is owed, or runs in the
//     background); once the node is healed and every Locker has heard it
//     answer, owed releases have been delivered, and a value written
//     before the fault survives only if a Locker closed meanwhile (Close's
//     last try is bounded); no node holds some of a set's keys and not
//     the others (a failed round's set too);
//  4. the keeper keeps only held, kept-alive locks;
//  5. the Lockers start timers at a bounded rate per fake second (no spin;
//     a spin that never lets fake time move panics: see spinGuard);
//
// and at the ends of calls and of the program:
//
//  6. no goroutine outlives Close (goleak, then synctest itself);
//  7. a Do function's lock stays on a quorum until fn returns, unless it
//     was lost (fn's context or Do's error says so);
//  8. Close or Shutdown during Do cancels fn's context with ErrClosed,
//     and Do returns ErrClosed; Shutdown returns by its context's end;
//  9. a Release after one that returned ErrUnavailable asks the nodes
//     that failed again; once every fault is healed, it leaves no value;
//  10. a lock announced at risk (its Done, or its Do function's context,
//     with ErrLockAtRisk, which matches ErrLockLost) had an extension fail
//     since it was taken, and is still on a quorum then; a Lock has the
//     at-risk margin of validity left, or less only when a failed
//     extension ended at that instant (one that began too late).
//
// Two liberties, both explained where they are taken: core's test hook
// puts a racing Release or Close inside KeepAlive (race), and the calls
// that core makes while holding a lock's mutex fail at once on a paused or
// slow node instead of after the node timeout (handle).
//
// Goroutines run in parallel inside the bubble, so a seed replays the same
// program and faults but not always the same interleaving.
// QUORUMLOCK_MODEL_SEEDS=n runs seeds 1..n (default 500);
// QUORUMLOCK_MODEL_SEED=s runs seed s alone. A failure prints the
// violations, the program and what happened, with the time of each.
func TestModel(t *testing.T) {
	seeds := modelSeeds(t)
	failed := 0
	for _, seed := range seeds {
		if !t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) { runModel(t, seed) }) {
			if failed++; failed == 5000 {
				t.Fatalf("stopping after %d failed seeds", failed)
			}
		}
	}
}

func modelSeeds(t *testing.T) (seeds []uint64) {
	if s := os.Getenv("QUORUMLOCK_MODEL_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("QUORUMLOCK_MODEL_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	n := uint64(500)
	if s := os.Getenv("QUORUMLOCK_MODEL_SEEDS"); s != "" {
		var err error
		if n, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("QUORUMLOCK_MODEL_SEEDS=%q: %v", s, err)
		}
	}
	for s := uint64(1); s <= n; s++ {
		seeds = append(seeds, s)
	}
	return seeds
}

const (
	modelTTL = time.Second
	// spinReads is how many clock reads at one fake instant make a spin:
	// normal work reads it a few hundred times per instant.
	spinReads = 200_000
	// wakeRate bounds the timers a program's Lockers start per fake
	// second: normal work starts at most a few dozen, and a loop that only
	// the 1 ms floor slows down, a thousand.
	wakeRate = 400
	// modelWatchdog bounds a seed's wall time: a deadlock, or a spin that
	// reads no clock, ends there, with every goroutine's stack.
	modelWatchdog  = 20 * time.Second
	minNodeTimeout = 10 * time.Millisecond
	// raceWait bounds how long a race's KeepAlive waits for its partner.
	raceWait = 50 * time.Millisecond
)

// runModel runs one seed's program in a bubble. A spin panics with the
// seed (see spinGuard); goroutines left blocked after the program make
// synctest panic, which is reported here.
func runModel(t *testing.T, seed uint64) {
	p := newProgram(seed)
	replay := fmt.Sprintf("(replay: QUORUMLOCK_MODEL_SEED=%d go test -race -run TestModel ./core/)", seed)
	watchdog := time.AfterFunc(modelWatchdog, func() {
		buf := make([]byte, 1<<22)
		os.Stderr.Write(buf[:runtime.Stack(buf, true)])
		panic(fmt.Sprintf("model seed %d: no end after %v of wall time: a deadlock or a spin %s", seed, modelWatchdog, replay))
	})
	defer watchdog.Stop()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("seed %d: synctest: %v (goroutines blocked for ever: after every Close, none may be left) %s", seed, r, replay)
		}
	}()
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, p)
		w.run()
		if len(w.violations) > 0 {
			// At once too: a hang in a later seed would lose t's output.
			fmt.Fprintf(os.Stderr, "model: seed %d: %s\n", seed, w.violations[0])
			t.Errorf("seed %d: %d violation(s):\n  %s\n%s\nprogram:\n%s\nlog:\n%s",
				seed, len(w.violations), strings.Join(w.violations, "\n  "), replay, p, strings.Join(w.log, "\n"))
		}
	})
}

// ---- Programs ----

type program struct {
	seed    uint64
	names   []string // the nodes' names; the herald is the first by name
	herald  int
	guard   bool // the restart guard is on (nodes restart empty at any time)
	lockers []lockerConf
	keys    []string
	steps   []step
}

type lockerConf struct {
	strategy    int // index in allStrategies()
	keepAlive   time.Duration
	nodeTimeout time.Duration
	fencing     bool
	wake        bool
}

type step struct {
	op     int // index in modelOps
	locker int
	key    int
	pick   int           // which lock, among those known when it runs
	node   int           // for faults
	d      time.Duration // the operation's knob: a timeout, fn's time, a latency
	flag   bool          // on/off, a stubborn fn
	after  time.Duration // the time that passes after the step
}

func newProgram(seed uint64) *program {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	n := []int{3, 5}[r.IntN(2)]
	p := &program{seed: seed, guard: r.IntN(3) == 0}
	for i, k := range r.Perm(n) {
		p.names = append(p.names, "n"+strconv.Itoa(k))
		if k == 0 {
			p.herald = i
		}
	}
	for range 2 + r.IntN(3) {
		c := lockerConf{
			strategy:    r.IntN(len(allStrategies())),
			nodeTimeout: minNodeTimeout + time.Duration(r.IntN(21))*time.Millisecond,
			fencing:     r.IntN(3) == 0,
			wake:        r.IntN(4) != 0,
		}
		if r.IntN(2) == 0 {
			c.keepAlive = time.Duration(100+r.IntN(200)) * time.Millisecond
		}
		p.lockers = append(p.lockers, c)
	}
	// Often one key, contended by every Locker: waiters, hand-offs and
	// woken rounds. "a}b" has no wait queue (its waiters poll).
	p.keys = []string{"k0", "a}b", "k1"}[:max(1, r.IntN(5)-1)]
	total := 0
	for _, op := range modelOps {
		total += op.weight
	}
	for range 20 + r.IntN(41) {
		s := step{
			locker: r.IntN(len(p.lockers)), key: r.IntN(len(p.keys)), pick: r.IntN(1 << 20),
			node: r.IntN(n), d: time.Duration(r.IntN(1500)) * time.Millisecond,
			flag: r.IntN(2) == 0,
		}
		if r.IntN(2) == 0 {
			s.node = p.herald // the herald: hand-offs, and woken rounds ask it first
		}
		if r.IntN(3) > 0 {
			s.after = time.Duration(r.IntN(300)) * time.Millisecond
		}
		for x := r.IntN(total); ; s.op++ {
			if x -= modelOps[s.op].weight; x < 0 {
				break
			}
		}
		p.steps = append(p.steps, s)
	}
	return p
}

func (p *program) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  nodes %v (herald %s), restart guard %v, keys %q\n", p.names, p.names[p.herald], p.guard, p.keys)
	for i, c := range p.lockers {
		fmt.Fprintf(&b, "  L%d: %s, keep-alive %v, node timeout %v, fencing %v, wake %v\n",
			i, allStrategies()[c.strategy], c.keepAlive, c.nodeTimeout, c.fencing, c.wake)
	}
	for i, s := range p.steps {
		fmt.Fprintf(&b, "  %2d %-18s L%d %-4s pick %d %s d=%v flag=%v, then %v\n", i, modelOps[s.op].name,
			s.locker, p.keys[s.key], s.pick, p.names[s.node], s.d, s.flag, s.after)
	}
	return b.String()
}

// modelOps is the table of steps: the operations a program makes and the
// faults it injects, with how often each comes.
var modelOps = []struct {
	name   string
	weight int
	run    func(w *world, s step)
}{
	// The acquiring steps weigh what Acquire, TryAcquire and Do weighed
	// before the other kinds came, so that a seed costs about as much.
	{"Acquire", 6, func(w *world, s step) { w.acquire(s, false) }},
	{"TryAcquire", 3, func(w *world, s step) { w.acquire(s, true) }},
	{"AcquireAll", 3, func(w *world, s step) { w.acquireKind(s, false, false) }},
	{"TryAcquireAll", 1, func(w *world, s step) { w.acquireKind(s, false, true) }},
	{"AcquireShared", 3, func(w *world, s step) { w.acquireKind(s, true, false) }},
	{"TryAcquireShared", 1, func(w *world, s step) { w.acquireKind(s, true, true) }},
	{"AcquirePermit", 3, func(w *world, s step) { w.acquirePermit(s, false) }}, // model_sem_test.go
	{"TryAcquirePermit", 1, func(w *world, s step) { w.acquirePermit(s, true) }},
	{"Extend", 4, (*world).extend},
	{"KeepAlive", 5, (*world).keepAlive},
	{"Release", 6, (*world).release},
	{"Do", 6, (*world).do},
	{"Close", 1, (*world).closeLocker},
	{"KeepAlive|Release", 3, (*world).raceRelease},
	{"KeepAlive|Close", 1, (*world).raceClose},
	{"Stop", 3, (*world).stop},
	{"Pause", 3, (*world).pause},
	{"Latency", 3, (*world).latency},
	{"DropReplies", 4, (*world).dropReplies},
	{"DropConnections", 4, (*world).dropConnections},
	{"RefuseWatches", 3, (*world).refuseWatches},
}

// ---- The world and its model ----

// world is a running program: the nodes and Lockers, and the model of
// what they did. mu guards the model.
type world struct {
	p       *program
	t0      time.Time // the program's start
	nodes   []*memory.Node
	lockers []*modelLocker
	quorum  int
	// healedReleases are locks released with every node healed, checked
	// once every Locker has closed.
	healedReleases []*lockRec
	ops            sync.WaitGroup         // the goroutines of operations
	wakes          atomic.Int64           // timers the Lockers started
	armed          atomic.Pointer[func()] // for core's keeper hook: see race
	spin           spinGuard
	// extFailed has, by Locker and key, when each extension that did not
	// reach a quorum ended (modelObserver).
	extFailed sync.Map // extKey -> *extFailures

	mu         sync.Mutex
	changed    chan struct{} // closed and made again when a claim is taken (see claim)
	locks      []*lockRec
	dos        []*doRec
	acquiring  map[string]int // Acquire, TryAcquire and Do calls running, by key
	nodeState  []nodeState
	releases   map[string][]int    // release calls by value, per node
	sets       map[string][]string // the keys of each set's value that a grant asked for (see handle)
	wakeLog    []wakeSample        // wake-ups counted at each check
	violations []string
	log        []string
}

type modelLocker struct {
	id       int
	l        *core.Locker
	closing  time.Time // when the first Close or Shutdown began (zero: open)
	closed   bool      // a Close or Shutdown finished it
	users    int       // Extend and Release calls running on its locks (see claim)
	closing1 bool      // a Close or Shutdown is running
}

// holder is one claim on a key: a Lock's from its Acquire's return until
// its release begins or its Done fires; a Do function's from its start
// until it returns or its context ends (with the lock lost, or Close, or
// the caller's deadline: fn must stop then, and a lock lost after that
// cannot tell it).
type holder struct {
	name   string
	locker *modelLocker
	key    string   // the lock's Key: a set's keys joined by commas
	keys   []string // the keys it holds: a set's, sorted, or the one key
	set    bool     // a multi-key lock (AcquireAll)
	shared bool     // a read lock: it conflicts only with exclusive holders
	sem    string   // a permit's semaphore (key); keys is its slot
	value  string
	from   time.Time
	until  time.Time // zero: still holding
}

// kind names the holder's kind of lock in the log: "set " or "read ",
// and nothing for a mutex (a writer).
func (h holder) kind() string {
	switch {
	case h.shared:
		return "read "
	case h.set:
		return "set "
	case h.sem != "":
		return "permit "
	}
	return ""
}

// target is what h holds, without its changing fields: it may be read
// without w.mu.
func (h *holder) target() holder {
	return holder{key: h.key, keys: h.keys, set: h.set, shared: h.shared, sem: h.sem}
}

// lockName names h's kind as Event.Lock does.
func (h *holder) lockName() string {
	switch {
	case h.shared:
		return "shared"
	case h.set:
		return "multi"
	case h.sem != "":
		return "semaphore"
	}
	return "mutex"
}

// shares reports whether h and o have a key in common.
func (h *holder) shares(o *holder) bool {
	return slices.ContainsFunc(h.keys, func(k string) bool { return slices.Contains(o.keys, k) })
}

type lockRec struct {
	holder
	lock      *core.Lock
	start     time.Time // the Acquire call's
	keptAlive bool
	busy      bool      // an Extend or Release call is running (see claim)
	releasing int       // Release calls running
	released  time.Time // the first Release's start
	settled   bool      // a Release or Close returned
	failed    []int     // the nodes that failed the last Release, if it returned ErrUnavailable
}

type doRec struct {
	holder
	running       bool      // the Do call
	fnRunning     bool      // fn
	cancelled     time.Time // fn's context ended
	cause         error
	closedWhileFn time.Time // the Locker's Close began while fn ran
	short         string    // fn returned, its context cancelled, without its value on a quorum
}

// nodeState is what the faults did to a node: since when it is impaired
// (down, paused or slow; zero: not) and the spans it was, and its empty
// restarts.
type nodeState struct {
	since    [impKinds]time.Time
	spans    [][2]time.Time
	restarts []time.Time
	stopped  time.Time
}

const (
	impDown = iota
	impPaused
	impSlow
	impKinds
)

func newWorld(t *testing.T, p *program) *world {
	w := &world{p: p, t0: time.Now(), changed: make(chan struct{}), acquiring: map[string]int{}, releases: map[string][]int{}, sets: map[string][]string{}}
	w.spin.w = w
	for _, name := range p.names {
		w.nodes = append(w.nodes, memory.New(memory.WithName(name)))
	}
	w.nodeState = make([]nodeState, len(w.nodes))
	w.quorum = len(w.nodes)/2 + 1
	for i, c := range p.lockers {
		ml := &modelLocker{id: i}
		nodes := make([]core.Node, len(w.nodes))
		for j, n := range w.nodes {
			nodes[j] = &handle{Node: n, w: w, locker: i, index: j}
		}
		opts := []core.Option{
			core.WithTTL(modelTTL), core.WithClock(countingClock{driver.SystemClock(), w}),
			core.WithObserver(modelObserver{w: w, locker: i}),
			core.WithNodeTimeout(c.nodeTimeout), core.WithStrategy(allStrategies()[c.strategy]),
			core.WithWakeOnRelease(c.wake), core.WithRestartGuard(0),
		}
		if p.guard {
			opts[len(opts)-1] = core.WithRestartGuard(modelTTL)
		}
		if c.keepAlive > 0 {
			opts = append(opts, core.WithKeepAlive(c.keepAlive))
		}
		if c.fencing {
			opts = append(opts, core.WithFencing(true))
		}
		l, err := core.New(nodes, opts...)
		if err != nil {
			t.Fatalf("L%d: %v", i, err)
		}
		if p.guard {
			if err := l.Adopt(t.Context()); err != nil { // fresh nodes hold no lock
				t.Fatalf("L%d: adopt: %v", i, err)
			}
		}
		ml.l = l
		w.lockers = append(w.lockers, ml)
	}
	return w
}

// run plays the program, then heals every fault, retries the releases
// that failed, releases and closes everything, and checks that nothing is
// left.
func (w *world) run() {
	ignore := goleak.IgnoreCurrent()
	defer core.SetKeeperAddHook(func() {
		if hook := w.armed.Swap(nil); hook != nil {
			(*hook)()
		}
	})()
	for i, s := range w.p.steps {
		w.logf("step %d: %s (L%d, %s, %s)", i, modelOps[s.op].name, s.locker, w.p.keys[s.key], w.p.names[s.node])
		modelOps[s.op].run(w, s)
		time.Sleep(s.after)
		if !w.check() {
			break
		}
	}
	w.finish()
	if err := goleak.Find(ignore); err != nil {
		w.violate("goroutines left after every Close: %v", err)
	}
}

func (w *world) finish() {
	w.logf("heal, release, close")
	for i, n := range w.nodes {
		w.restart(i, false)
		n.Resume()
		n.SetLatency(0)
		n.DropReplies(false)
		n.RefuseWatches(false)
		w.heal(i, impPaused)
		w.heal(i, impSlow)
	}
	w.mu.Lock()
	var open []*lockRec // not released, or released with ErrUnavailable
	for _, r := range w.locks {
		if r.locker.closing.IsZero() && (r.released.IsZero() || r.failed != nil) {
			open = append(open, r)
		}
	}
	w.mu.Unlock()
	for _, r := range open {
		w.releaseLock(r, true)
	}
	w.mu.Lock()
	healed := make([]bool, len(w.lockers)) // first closed now: every release can succeed
	for i, ml := range w.lockers {
		healed[i] = ml.closing.IsZero()
	}
	w.mu.Unlock()
	for _, ml := range w.lockers {
		w.spawn(func() { w.closeNow(ml, false, 0) })
	}
	w.ops.Wait()
	w.check()
	w.checkHealedReleases()
	for i, ml := range w.lockers {
		if st := ml.l.Stats(); st.KeptAlive != 0 || (healed[i] && st.Held != 0) {
			w.violate("L%d: %d locks kept alive and %d held after every release and Close", ml.id, st.KeptAlive, st.Held)
		}
	}
	synctest.Wait()
}

// spawn runs an operation in a goroutine of its own.
func (w *world) spawn(f func()) {
	w.ops.Add(1)
	go func() {
		defer w.ops.Done()
		f()
	}()
}

func (w *world) now() time.Duration { return time.Since(w.t0) }

func (w *world) logf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, fmt.Sprintf("%9v ", w.now())+fmt.Sprintf(format, args...))
}

func (w *world) violate(format string, args ...any) {
	msg := fmt.Sprintf("%v: ", w.now()) + fmt.Sprintf(format, args...)
	w.logf("VIOLATION %s", msg)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.violations, msg) {
		w.violations = append(w.violations, msg)
	}
}

// ---- Operations ----

func (w *world) acquire(s step, try bool) {
	ml, key := w.lockers[s.locker], w.p.keys[s.key]
	w.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond+s.d)
		defer cancel()
		start := w.enterCall(key, +1)
		acquire, name := ml.l.Acquire, "Acquire"
		if try {
			acquire, name = ml.l.TryAcquire, "TryAcquire"
		}
		lock, err := acquire(ctx, key)
		if err == nil {
			w.took(ml, holder{key: key, keys: []string{key}}, lock, start)
		}
		w.enterCall(key, -1)
		w.logf("L%d %s %s: %v %.6s", ml.id, name, key, short(err), lock.Value())
		w.expect(name, err, core.ErrNotAcquired, core.ErrUnavailable, core.ErrNodeRestarted, core.ErrValidityExpired, core.ErrClosed,
			context.DeadlineExceeded, w.badKey(ml, key))
	})
}

// acquireKind takes a read lock on the step's key (shared), or a lock on a
// small set of the program's keys, given in the program's order: the
// step's key and those that pick's bits name. A read lock on "a}b" (whose
// readers cannot share its slot) is refused, so flag alone asks for it.
func (w *world) acquireKind(s step, shared, try bool) {
	ml, keys := w.lockers[s.locker], []string{w.p.keys[s.key]}
	if shared && strings.Contains(keys[0], "}") && !s.flag {
		keys[0] = w.p.keys[0]
	}
	if !shared {
		keys = keys[:0]
		for i, k := range w.p.keys {
			if i == s.key || s.pick>>(4+i)&1 == 1 {
				keys = append(keys, k)
			}
		}
	}
	h := holder{keys: slices.Sorted(slices.Values(keys)), set: !shared, shared: shared}
	h.key = strings.Join(h.keys, ",")
	w.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond+s.d)
		defer cancel()
		start := w.enterCalls(h.keys, +1)
		one := func(f func(context.Context, string) (*core.Lock, error)) func(context.Context, ...string) (*core.Lock, error) {
			return func(ctx context.Context, keys ...string) (*core.Lock, error) { return f(ctx, keys[0]) }
		}
		name, acquire := "AcquireAll", ml.l.AcquireAll
		switch {
		case shared && try:
			name, acquire = "TryAcquireShared", one(ml.l.TryAcquireShared)
		case shared:
			name, acquire = "AcquireShared", one(ml.l.AcquireShared)
		case try:
			name, acquire = "TryAcquireAll", ml.l.TryAcquireAll
		}
		lock, err := acquire(ctx, keys...)
		if err == nil {
			w.took(ml, h, lock, start)
		}
		w.enterCalls(h.keys, -1)
		w.logf("L%d %s %s: %v %.6s", ml.id, name, strings.Join(keys, " "), short(err), lock.Value())
		w.expect(name, err, core.ErrNotAcquired, core.ErrUnavailable, core.ErrNodeRestarted, core.ErrValidityExpired, core.ErrClosed,
			context.DeadlineExceeded, w.badKeys(ml, h))
	})
}

// took records a lock that an acquiring call returned, and watches for
// its end; h says what was asked for.
func (w *world) took(ml *modelLocker, h holder, lock *core.Lock, start time.Time) {
	now := time.Now()
	key := h.key
	if lock.Key() != h.key || h.sem == "" && !slices.Equal(lock.Keys(), h.keys) || lock.Shared() != h.shared {
		w.violate("L%d acquired %s (shared %v), but its lock says key %q, keys %q, shared %v",
			ml.id, h.key, h.shared, lock.Key(), lock.Keys(), lock.Shared())
	}
	// Validity first: a Close that releases the lock between the two reads
	// leaves Err saying so, where the other order read nil, then no validity.
	validity := lock.Validity()
	err := lock.Err()
	// Read after the lock: a Close that released it had begun by then.
	w.mu.Lock()
	closing := !ml.closing.IsZero()
	w.mu.Unlock()
	// A Close that began as Acquire returned releases the lock: it was
	// held when Close began (core.Locker.Shutdown).
	if released := errors.Is(err, core.ErrReleased) && closing; !released && (err != nil || validity <= 0) {
		w.violate("L%d acquired %s with no validity: %v", ml.id, key, err)
	}
	w.mu.Lock()
	h.locker, h.value, h.from = ml, lock.Value(), now
	r := &lockRec{holder: h, lock: lock, start: start}
	r.name = fmt.Sprintf("L%d %slock#%d", ml.id, h.kind(), len(w.locks))
	w.tokens(r)
	w.locks = append(w.locks, r)
	w.mu.Unlock()
	done := lock.Done()
	w.spawn(func() {
		<-done
		if cause := lock.Err(); errors.Is(cause, core.ErrLockAtRisk) {
			w.atRisk(r, cause, lock.Validity())
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if r.until.IsZero() {
			r.until = time.Now()
		}
	})
}

// atRisk checks a Lock's at-risk notice, when it comes (check 10): left is
// its validity then.
func (w *world) atRisk(r *lockRec, cause error, left time.Duration) {
	now := time.Now()
	failed, endedNow := w.extensionFailed(r.locker.id, r.target(), r.from, now)
	n, need := w.holding(r.target(), r.value, r.from)
	w.mu.Lock()
	// A Release (Close's too) that began may have deleted it since.
	releasing := !r.released.IsZero() || !r.locker.closing.IsZero()
	w.mu.Unlock()
	w.logf("%s at risk, %v left: %v", r.name, left, short(cause))
	switch {
	case !errors.Is(cause, core.ErrLockLost):
		w.violate("%s: at risk, but its cause does not match ErrLockLost: %v", r.name, cause)
	case !failed:
		w.violate("%s: at risk with no failed extension since it was taken: %v", r.name, cause)
	case n < need && !releasing:
		w.violate("%s: announced at risk with its value on %d nodes, not %d: too late", r.name, n, need)
	case left < modelTTL/core.DefaultAtRiskDivisor && !endedNow:
		w.violate("%s: announced at risk with %v of validity left, under the margin %v, and no extension failed just now",
			r.name, left, modelTTL/core.DefaultAtRiskDivisor)
	}
}

// extKey names a Locker's locks of one key and kind (Event.Lock).
type extKey struct {
	locker    int
	key, kind string
}

// extFailures are the ends of a key's failed extensions.
type extFailures struct {
	mu   sync.Mutex
	ends []time.Time
}

// modelObserver records the extensions of a Locker that did not reach a
// quorum (check 10).
type modelObserver struct {
	w      *world
	locker int
}

func (o modelObserver) Observe(_ context.Context, e core.Event) {
	if e.Kind != core.OpExtend || !errors.Is(e.Err, core.ErrUnavailable) {
		return
	}
	v, _ := o.w.extFailed.LoadOrStore(extKey{o.locker, e.Key, e.Lock}, new(extFailures))
	f := v.(*extFailures)
	f.mu.Lock()
	f.ends = append(f.ends, e.Start.Add(e.Duration))
	f.mu.Unlock()
}

// extensionFailed reports whether an extension of h's key and kind by a
// Locker failed between from and now, and whether one ended at now.
func (w *world) extensionFailed(locker int, h holder, from, now time.Time) (failed, endedNow bool) {
	v, ok := w.extFailed.Load(extKey{locker, h.key, h.lockName()})
	if !ok {
		return false, false
	}
	f := v.(*extFailures)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, end := range f.ends {
		if !end.Before(from) && !end.After(now) {
			failed = true
			endedNow = endedNow || end.Equal(now)
		}
	}
	return failed, endedNow
}

// tokens checks that a fenced lock's token is above those of the locks of
// its key taken before its Acquire began; w.mu is held. Without
// persistence, a node that restarts forgets its counters: no check then.
func (w *world) tokens(r *lockRec) {
	if r.lock.Token() == 0 || slices.ContainsFunc(w.nodeState, func(n nodeState) bool { return len(n.restarts) > 0 }) {
		return
	}
	for _, o := range w.locks {
		if r.shares(&o.holder) && o.lock.Token() > 0 && o.from.Before(r.start) && o.lock.Token() >= r.lock.Token() {
			w.violations = append(w.violations, fmt.Sprintf("%s has token %d, not above %s's %d, taken before it began",
				r.name, r.lock.Token(), o.name, o.lock.Token()))
		}
	}
}

// pick returns a lock the model knows, or nil; with held, only one that
// is held and not being released.
func (w *world) pick(s step, held bool) *lockRec {
	w.mu.Lock()
	locks := slices.Clone(w.locks)
	w.mu.Unlock()
	if held {
		locks = slices.DeleteFunc(locks, func(r *lockRec) bool { return !r.released.IsZero() || r.lock.Err() != nil })
	}
	if len(locks) == 0 {
		return nil
	}
	return locks[s.pick%len(locks)]
}

func (w *world) extend(s step) {
	if r := w.pick(s, false); r != nil {
		w.spawn(func() {
			w.claimLock(r)
			defer w.unclaimLock(r)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond+s.d/10)
			defer cancel()
			err := r.lock.Extend(ctx)
			w.logf("%s Extend: %v", r.name, short(err))
			var qe *core.QuorumError
			if errors.As(err, &qe) && qe.Reason == nil && qe.Context != nil {
				return // the context cut the round short
			}
			w.expect("Extend", err, core.ErrLockLost, core.ErrValidityExpired, core.ErrUnavailable, core.ErrNotHeld, core.ErrClosed)
		})
	}
}

func (w *world) keepAlive(s step) {
	if r := w.pick(s, false); r != nil {
		w.spawn(func() { w.keepLockAlive(r) })
	}
}

func (w *world) keepLockAlive(r *lockRec) {
	w.mu.Lock()
	r.keptAlive = true
	w.mu.Unlock()
	err := r.lock.KeepAlive()
	w.logf("%s KeepAlive: %v", r.name, short(err))
	w.expect("KeepAlive", err, core.ErrNotHeld, core.ErrLockLost, core.ErrClosed)
}

func (w *world) release(s step) {
	if r := w.pick(s, false); r != nil {
		w.spawn(func() { w.releaseLock(r, false) })
	}
}

// releaseLock releases r; healed says that no fault can stop it. A
// Release after one that returned ErrUnavailable must ask the nodes that
// failed again (check 9), and once healed, leave none holding the value.
func (w *world) releaseLock(r *lockRec, healed bool) {
	w.claimLock(r)
	defer w.unclaimLock(r)
	w.mu.Lock()
	retry := r.failed
	if r.releasing > 0 || !r.locker.closing.IsZero() {
		retry = nil // another Release, or Close, may ask them
	}
	if r.released.IsZero() {
		r.released = time.Now()
	}
	r.releasing++
	before := slices.Clone(w.releases[r.value])
	w.mu.Unlock()
	err := r.lock.Release(context.Background())
	w.logf("%s Release: %v", r.name, short(err))
	w.mu.Lock()
	r.settled, r.failed = true, nil
	r.releasing--
	if qe := (*core.QuorumError)(nil); errors.Is(err, core.ErrUnavailable) && errors.As(err, &qe) {
		r.failed = []int{}
		for _, n := range qe.Nodes {
			if n.Outcome == core.OutcomeFailed && !errors.Is(n.Err, core.ErrNodeSuspect) { // suspect: released in the background
				r.failed = append(r.failed, n.Index)
			}
		}
	}
	after := slices.Clone(w.releases[r.value])
	// Every node that failed it is owed it (ErrNodeSuspect).
	owed := r.failed != nil && len(r.failed) == 0
	w.mu.Unlock()
	w.expect("Release", err, core.ErrNotHeld, core.ErrUnavailable, core.ErrClosed)
	var qe *core.QuorumError
	errors.As(err, &qe)
	for _, i := range retry {
		// A suspect node is asked in the background, or owed the release:
		// a Release that returned nil may not have waited for it, nor one
		// whose result for it says so.
		background := err == nil || qe != nil && i < len(qe.Nodes) && errors.Is(qe.Nodes[i].Err, core.ErrNodeSuspect)
		if at(after, i) <= at(before, i) && !background {
			w.violate("%s: Release after ErrUnavailable did not ask %s, which had failed, again (returned %v)", r.name, w.p.names[i], short(err))
		}
	}
	if healed {
		// A node still suspect is owed the release when a call made before
		// the heal holds it: the release waits one node timeout at most for
		// that, then is sent after the node's next answer.
		if err != nil && !errors.Is(err, core.ErrNotHeld) && !owed {
			w.violate("%s: Release with every node healed: %v", r.name, err)
		}
		w.mu.Lock()
		w.healedReleases = append(w.healedReleases, r) // checked after Close
		w.mu.Unlock()
	}
}

// checkHealedReleases reports the values of locks released with every node
// healed still on a node once every Locker has closed (suspect nodes are
// released in the background, which Close waits for).
func (w *world) checkHealedReleases() {
	for _, r := range w.healedReleases {
		for i, n := range w.nodes {
			if _, k := holds(n, r.target(), r.value); k > 0 {
				w.violate("%s: Release with every node healed left its value on %s", r.name, w.p.names[i])
			}
		}
	}
}

func at(counts []int, i int) int {
	if i < len(counts) {
		return counts[i]
	}
	return 0
}

// do runs Locker.Do with a function that works for s.d, or until its
// context ends (and then, if stubborn, a little longer).
func (w *world) do(s step) {
	ml, key := w.lockers[s.locker], w.p.keys[s.key]
	w.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond+s.d)
		defer cancel()
		w.enterCall(key, +1)
		d := &doRec{holder: holder{locker: ml, key: key, keys: []string{key}}, running: true}
		w.mu.Lock()
		d.name = fmt.Sprintf("L%d Do#%d", ml.id, len(w.dos))
		w.dos = append(w.dos, d)
		w.mu.Unlock()
		err := ml.l.Do(ctx, key, func(fctx context.Context) error {
			w.fnStarts(d)
			timer := time.NewTimer(s.d)
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-fctx.Done():
				w.mu.Lock()
				d.cancelled, d.cause = time.Now(), context.Cause(fctx)
				d.until = d.cancelled
				w.mu.Unlock()
				w.doAtRisk(d)
				if s.flag {
					time.Sleep(s.d / 5) // stubborn: not at once
				}
			}
			w.fnReturns(d)
			return nil
		})
		w.logf("%s %s: %v", d.name, key, short(err))
		w.doReturns(d, err)
		w.enterCall(key, -1)
		w.expect("Do", err, core.ErrNotAcquired, core.ErrUnavailable, core.ErrNodeRestarted, core.ErrValidityExpired, core.ErrClosed,
			context.DeadlineExceeded, core.ErrLockLost, core.ErrNotHeld, w.badKey(ml, key))
	})
}

// fnStarts finds fn's lock value: the one on a quorum of the nodes.
func (w *world) fnStarts(d *doRec) {
	now := time.Now()
	counts := map[string]int{}
	for _, n := range w.nodes {
		if v, _, ok := n.Get(d.key); ok {
			counts[v]++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	d.from, d.fnRunning = now, true
	for v, c := range counts {
		if c > counts[d.value] {
			d.value = v
		}
	}
	w.log = append(w.log, fmt.Sprintf("%9v %s: fn starts, value %.6s on %d nodes", w.now(), d.name, d.value, counts[d.value]))
	if need := w.quorum - w.restartedLocked(now.Add(-modelTTL/4)); counts[d.value] < need {
		w.violations = append(w.violations, fmt.Sprintf("%v: %s: fn runs, but no value of %s is on %d nodes: %v", w.now(), d.name, d.key, need, counts))
	}
}

// doAtRisk checks a Do function's at-risk notice, when it comes (check
// 10): Close does not release a lock under a running fn.
func (w *world) doAtRisk(d *doRec) {
	w.mu.Lock()
	cause, from, value := d.cause, d.from, d.value
	w.mu.Unlock()
	if !errors.Is(cause, core.ErrLockAtRisk) {
		return
	}
	failed, _ := w.extensionFailed(d.locker.id, d.target(), from, time.Now())
	n, need := w.holding(d.target(), value, from)
	switch {
	case !errors.Is(cause, core.ErrLockLost):
		w.violate("%s: fn's context at risk, but its cause does not match ErrLockLost: %v", d.name, cause)
	case !failed:
		w.violate("%s: fn's context at risk with no failed extension since fn started: %v", d.name, cause)
	case n < need:
		w.violate("%s: fn's context announced at risk with its value on %d nodes, not %d: too late", d.name, n, need)
	}
}

// fnReturns checks that fn held its lock until now (check 7). A lock
// lost after fn's context ended for another reason (Close, the caller's
// deadline) cannot say so to fn: Do's error will, and doReturns judges.
func (w *world) fnReturns(d *doRec) {
	now := time.Now()
	n, need := w.holding(d.target(), d.value, d.from)
	w.mu.Lock()
	defer w.mu.Unlock()
	d.fnRunning = false
	switch {
	case errors.Is(d.cause, core.ErrLockLost), n >= need:
	case d.cancelled.IsZero():
		w.violations = append(w.violations, fmt.Sprintf("%v: %s: fn returns, its context not cancelled, but its value is on %d nodes, not %d: released under it",
			w.now(), d.name, n, need))
	default:
		d.short = fmt.Sprintf("its value is on %d nodes, not %d", n, need)
	}
	if d.until.IsZero() {
		d.until = now
	}
}

// doReturns checks that a lock gone under fn was lost, not released
// (check 7), and what Close did to a running fn (check 8).
func (w *world) doReturns(d *doRec, err error) {
	w.mu.Lock()
	d.running = false
	closed, cause, cancelled, short := d.closedWhileFn, d.cause, d.cancelled, d.short
	w.mu.Unlock()
	if short != "" && !errors.Is(err, core.ErrLockLost) {
		w.violate("%s: when fn returned (its context cancelled with %v), %s, and Do says nothing of a lost lock: released under it (Do returned %v)",
			d.name, cause, short, err)
	}
	if closed.IsZero() {
		return
	}
	tie := cancelled.Equal(closed) && (errors.Is(cause, core.ErrLockLost) || errors.Is(cause, context.DeadlineExceeded))
	switch {
	case tie:
	case !errors.Is(cause, core.ErrClosed):
		w.violate("%s: Close began while fn ran; fn's context ended with %v, not ErrClosed", d.name, cause)
	case !errors.Is(err, core.ErrClosed):
		w.violate("%s: Close cut fn short, but Do returned %v, not ErrClosed", d.name, err)
	}
}

func (w *world) closeLocker(s step) {
	w.spawn(func() { w.closeNow(w.lockers[s.locker], s.flag, s.d) })
}

// closeNow closes ml, with Close or (flag) Shutdown bounded by d, noting
// the Do functions it must cut short.
func (w *world) closeNow(ml *modelLocker, shutdown bool, d time.Duration) {
	w.claim(func() bool { return !ml.closing1 && ml.users == 0 }, func() { ml.closing1 = true })
	defer w.claim(func() bool { return true }, func() { ml.closing1 = false })
	w.mu.Lock()
	if ml.closing.IsZero() {
		ml.closing = time.Now()
		for _, d := range w.dos {
			if d.locker == ml && d.fnRunning && d.cancelled.IsZero() {
				d.closedWhileFn = ml.closing
			}
		}
	}
	w.mu.Unlock()
	var err error
	if shutdown {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		start := time.Now()
		err = ml.l.Shutdown(ctx)
		cancel()
		if took := time.Since(start); took > d {
			w.violate("L%d Shutdown bounded by %v returned after %v", ml.id, d, took)
		}
	} else {
		err = ml.l.Close()
	}
	w.logf("L%d Close (Shutdown %v, bound %v): %v", ml.id, shutdown, d, short(err))
	if errors.Is(err, context.DeadlineExceeded) {
		return // holders still at work: their locks stay held
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ml.closed = true
	for _, r := range w.locks {
		if r.locker == ml {
			r.settled = true
		}
	}
}

// raceRelease runs KeepAlive of a held lock with its Release falling
// where a real race can put it, and rarely does: between KeepAlive's
// check and the keeper's insertion (see race).
func (w *world) raceRelease(s step) {
	if r := w.pick(s, true); r != nil {
		w.spawn(func() { w.race(r, func() { w.releaseLock(r, false) }) })
	}
}

// raceClose runs KeepAlive of a held lock with its Locker's Close at the
// same point.
func (w *world) raceClose(s step) {
	if r := w.pick(s, true); r != nil {
		w.spawn(func() { w.race(r, func() { w.closeNow(r.locker, s.flag, s.d) }) })
	}
}

// race calls KeepAlive on r with partner armed in core's test hook, which
// runs as KeepAlive hands the lock to the keeper: partner starts then, and
// KeepAlive goes on once r has ended or after raceWait. A KeepAlive of
// another lock may take the hook: partner then runs there.
func (w *world) race(r *lockRec, partner func()) {
	hook := func() {
		w.spawn(partner)
		select {
		case <-r.lock.Done():
		case <-time.After(raceWait):
		}
	}
	w.armed.Store(&hook)
	w.keepLockAlive(r)
	if w.armed.CompareAndSwap(&hook, nil) { // KeepAlive did not get that far
		w.spawn(partner)
	}
}

// claim waits until cond holds, then runs take, both under w.mu. Core
// holds a lock's sync.Mutex while Extend waits for the nodes, and a
// goroutine blocked on a sync.Mutex is not durably blocked: the bubble's
// clock would stop, and the Extend wait for ever. So a Release (or another
// Extend) of the lock, and the Locker's Close, which releases it, wait
// here for the Extend to end, durably; Closes go one at a time too, for the
// same reason. (Calls that Release, Close and the keeper make under the
// mutex fail at once on a paused node: see handle.)
func (w *world) claim(cond func() bool, take func()) {
	for {
		w.mu.Lock()
		if cond() {
			take()
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
			return
		}
		changed := w.changed
		w.mu.Unlock()
		<-changed
	}
}

// claimLock waits until no Extend or Release of r runs, nor its Locker's
// Close.
func (w *world) claimLock(r *lockRec) {
	ml := r.locker
	w.claim(func() bool { return !r.busy && !ml.closing1 }, func() { r.busy = true; ml.users++ })
}

func (w *world) unclaimLock(r *lockRec) {
	w.claim(func() bool { return true }, func() { r.busy = false; r.locker.users-- })
}

// enterCall counts the acquiring calls running on key (their values may
// be on the nodes), and returns the time.
func (w *world) enterCall(key string, delta int) time.Time {
	return w.enterCalls([]string{key}, delta)
}

// enterCalls is enterCall for a call on several keys.
func (w *world) enterCalls(keys []string, delta int) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, key := range keys {
		w.acquiring[key] += delta
	}
	return time.Now()
}

// badKey is the error a key that fencing cannot serve gets: "a}b" has no
// hash tag for its fencing counter.
func (w *world) badKey(ml *modelLocker, key string) error {
	return w.badKeys(ml, holder{keys: []string{key}})
}

// badKeys is the error a call on h's keys gets when one cannot be served:
// "a}b" has no hash tag for its fencing counter, nor its readers set.
func (w *world) badKeys(ml *modelLocker, h holder) error {
	for _, key := range h.keys {
		if (h.shared || w.p.lockers[ml.id].fencing) && strings.Contains(key, "}") {
			return core.ErrInvalidArgument
		}
	}
	return nil
}

// expect records err as a violation unless it is nil or matches one of
// the errors the operation may return.
func (w *world) expect(op string, err error, allowed ...error) {
	if err == nil || slices.ContainsFunc(allowed, func(a error) bool { return errors.Is(err, a) }) {
		return
	}
	w.violate("%s returned an unexpected error: %v", op, err)
}

func short(err error) string {
	if err == nil {
		return "ok"
	}
	return core.Reason(err) + ": " + err.Error()
}

// ---- Faults ----
//
// Each fault lasts the step's d, then heals. Those that make calls wait
// (a pause, a latency) start only when every goroutine is blocked, that
// is at a step: see handle.

// stop takes a node down, then restarts it (see restart).
func (w *world) stop(s step) {
	i := s.node
	if w.isDown(i) {
		return
	}
	w.impair(i, impDown)
	w.mu.Lock()
	w.nodeState[i].stopped = time.Now()
	w.mu.Unlock()
	w.nodes[i].Stop()
	w.later(s.d, func() { w.restart(i, s.flag) })
}

// restart starts a stopped node again: with empty, as a Redis server
// without persistence, when the restart guard is on or it has been down a
// TTL (the Redlock rule without the guard); otherwise with its data. Its
// pub/sub connections drop either way.
func (w *world) restart(i int, empty bool) {
	if !w.isDown(i) {
		return
	}
	w.mu.Lock()
	empty = empty && (w.p.guard || time.Since(w.nodeState[i].stopped) >= modelTTL)
	if empty {
		w.nodeState[i].restarts = append(w.nodeState[i].restarts, time.Now())
	}
	w.mu.Unlock()
	w.logf("Start %s, empty %v", w.p.names[i], empty)
	if empty {
		w.nodes[i].Start()
	} else {
		w.nodes[i].StartKeepingData()
	}
	w.heal(i, impDown)
	w.nodes[i].DropConnections()
}

func (w *world) pause(s step) {
	w.impair(s.node, impPaused)
	w.nodes[s.node].Pause()
	w.later(s.d, func() {
		w.nodes[s.node].Resume()
		w.heal(s.node, impPaused)
	})
}

// latency slows a node down by 15, 25 or 80 ms: beyond some or all of the
// Lockers' node timeouts.
func (w *world) latency(s step) {
	w.impair(s.node, impSlow)
	w.nodes[s.node].SetLatency([]time.Duration{15, 25, 80}[s.pick%3] * time.Millisecond)
	w.later(s.d, func() {
		w.nodes[s.node].SetLatency(0)
		w.heal(s.node, impSlow)
	})
}

func (w *world) dropReplies(s step) {
	w.nodes[s.node].DropReplies(true)
	w.later(s.d, func() { w.nodes[s.node].DropReplies(false) })
}

// dropConnections drops the node's connections: its subscriptions hear
// the empty notice of a resubscription, and (flag) the replies to the
// commands sent meanwhile are lost for a while.
func (w *world) dropConnections(s step) {
	if s.flag {
		w.dropReplies(step{node: s.node, d: s.d / 4})
	}
	w.nodes[s.node].DropConnections()
}

// refuseWatches makes the node refuse new subscriptions for a while: the
// hub tries again with backoff, and no try may outlive Close.
func (w *world) refuseWatches(s step) {
	w.nodes[s.node].RefuseWatches(true)
	w.later(s.d, func() { w.nodes[s.node].RefuseWatches(false) })
}

// later runs f after d, in a goroutine of its own.
func (w *world) later(d time.Duration, f func()) {
	w.spawn(func() {
		time.Sleep(d)
		f()
	})
}

// slow reports whether node i is paused or slowed down.
func (w *world) slow(i int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.nodeState[i].since[impPaused].IsZero() || !w.nodeState[i].since[impSlow].IsZero()
}

func (w *world) impair(i, kind int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := &w.nodeState[i]; st.since[kind].IsZero() {
		st.since[kind] = time.Now()
	}
}

func (w *world) heal(i, kind int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := &w.nodeState[i]; !st.since[kind].IsZero() {
		st.spans = append(st.spans, [2]time.Time{st.since[kind], time.Now()})
		st.since[kind] = time.Time{}
	}
}

func (w *world) isDown(i int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.nodeState[i].since[impDown].IsZero()
}

// impairedLocked reports whether node i was down, paused or slow at some
// time since from; w.mu is held.
func (w *world) impairedLocked(i int, from time.Time) bool {
	st := &w.nodeState[i]
	for _, s := range st.since {
		if !s.IsZero() {
			return true
		}
	}
	return slices.ContainsFunc(st.spans, func(s [2]time.Time) bool { return !s[1].Before(from) })
}

// restartedLocked counts the nodes that restarted empty since from: the
// locks they held are gone from them. w.mu is held.
func (w *world) restartedLocked(from time.Time) int {
	n := 0
	for _, st := range w.nodeState {
		if slices.ContainsFunc(st.restarts, func(r time.Time) bool { return !r.Before(from) }) {
			n++
		}
	}
	return n
}

// holding counts the nodes that hold h's lock with value, and how many
// must: a quorum, less the nodes restarted empty since from.
func (w *world) holding(h holder, value string, from time.Time) (n, need int) {
	for _, node := range w.nodes {
		if held, _ := holds(node, h, value); held {
			n++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return n, w.quorum - w.restartedLocked(from.Add(-modelTTL))
}

// holds reports whether a node holds h's lock with value (every key of a
// set; a reader in its key's readers set, while the key holds
// driver.SharedValue), and how many of its keys hold value (for a set).
func holds(node *memory.Node, h holder, value string) (held bool, keys int) {
	if h.shared {
		v, _, ok := node.Get(h.keys[0])
		_, in := node.Readers(readersKey(h.keys[0]))[value]
		return ok && v == driver.SharedValue && in, btoi(in)
	}
	for _, k := range h.keys {
		if v, _, ok := node.Get(k); ok && v == value {
			keys++
		}
	}
	return keys == len(h.keys), keys
}

// readersKey names key's readers set (the model's keys have no prefix).
func readersKey(key string) string {
	set, _ := driver.ReadersKey(key)
	return set
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ---- Checks ----

// check lets every goroutine settle and checks the model's invariants; it
// reports whether all hold.
func (w *world) check() bool {
	synctest.Wait()
	w.checkHolders()
	w.checkQuorums()
	w.checkValues()
	w.checkKeeper()
	w.checkWakes()
	w.checkPermits()
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.violations) == 0
}

// checkWakes: the Lockers start timers (their wake-ups) at a bounded
// rate over every fake second (check 5).
func (w *world) checkWakes() {
	now, wakes := w.now(), w.wakes.Load()
	w.mu.Lock()
	w.wakeLog = append(w.wakeLog, wakeSample{now, wakes})
	var since *wakeSample // the latest sample a second old or more
	for i := range w.wakeLog {
		if now-w.wakeLog[i].at >= time.Second {
			since = &w.wakeLog[i]
		}
	}
	w.mu.Unlock()
	if since == nil {
		return
	}
	if d, limit := wakes-since.wakes, int64(wakeRate*(now-since.at).Seconds()); d > limit {
		w.violate("the Lockers started %d timers in the %v since %v, more than %d: a spin", d, now-since.at, since.at, limit)
	}
}

type wakeSample struct {
	at    time.Duration
	wakes int64
}

// holders returns every claim on a key so far.
func (w *world) holders() []holder {
	w.mu.Lock()
	defer w.mu.Unlock()
	var hs []holder
	for _, r := range w.locks {
		h := r.holder
		if !r.released.IsZero() && (h.until.IsZero() || r.released.Before(h.until)) {
			h.until = r.released
		}
		hs = append(hs, h)
	}
	for _, d := range w.dos {
		if !d.from.IsZero() {
			hs = append(hs, d.holder)
		}
	}
	return hs
}

// checkHolders: no two claims conflict (check 1). At each claim's start,
// the model of each of its keys holds the claims live then: the
// exclusive holders (a mutex's, a Do's or a set's) and the readers. A key
// may have one exclusive holder and no reader, or readers alone.
func (w *world) checkHolders() {
	hs := w.holders()
	// The claims live at a's start: a itself, and those that began before
	// it (or with it, when a lasts) and end after it began. Each pair of
	// overlapping claims is judged at the later one's start.
	liveAt := func(a, b holder) bool {
		began := b.from.Before(a.from) || b.from.Equal(a.from) && !a.from.Equal(a.until)
		return began && (b.until.IsZero() || a.from.Before(b.until))
	}
	span := func(h holder) string {
		if h.until.IsZero() {
			return fmt.Sprintf("%s from %v on", h.name, h.from.Sub(w.t0))
		}
		return fmt.Sprintf("%s from %v to %v", h.name, h.from.Sub(w.t0), h.until.Sub(w.t0))
	}
	for i, a := range hs {
		for _, key := range a.keys {
			var exclusive, readers []string
			for j, b := range hs {
				if (j != i && !liveAt(a, b)) || !slices.Contains(b.keys, key) {
					continue
				}
				if b.shared {
					readers = append(readers, span(b))
				} else {
					exclusive = append(exclusive, span(b))
				}
			}
			if len(exclusive) > 1 || len(exclusive) == 1 && len(readers) > 0 {
				w.violate("conflicting holders of %s at %v: exclusive %s; %d reader(s) %s",
					key, a.from.Sub(w.t0), strings.Join(exclusive, ", "), len(readers), strings.Join(readers, ", "))
			}
		}
	}
}

// checkQuorums: a lock that says it is held, and a Do function whose
// context has not said otherwise, have their value on a quorum (check 2).
func (w *world) checkQuorums() {
	w.mu.Lock()
	locks, dos := slices.Clone(w.locks), slices.Clone(w.dos)
	w.mu.Unlock()
	for _, r := range locks {
		if r.lock.Err() != nil || r.lock.Validity() <= 0 {
			continue
		}
		if n, need := w.holding(r.target(), r.value, r.from); n < need {
			w.violate("%s says it is held (validity %v), but its value is on %d nodes, not %d", r.name, r.lock.Validity(), n, need)
		}
	}
	for _, d := range dos {
		w.mu.Lock()
		running, value, from := d.fnRunning && d.cancelled.IsZero(), d.value, d.from
		w.mu.Unlock()
		if n, need := w.holding(d.target(), value, from); running && n < need {
			w.violate("%s: fn runs, but its value is on %d nodes, not %d", d.name, n, need)
		}
	}
}

// suspectLocked reports whether a Locker has node i suspect or a call to
// it running in the background: a value written there may still be
// released in the background (or is owed its release). w.mu is held.
func (w *world) suspectLocked(i int) bool {
	for _, ml := range w.lockers {
		if core.Suspect(ml.l, i) {
			return true
		}
	}
	return false
}

// checkValues: every value on a node belongs to a lock not yet released,
// to a release or an acquiring call still running, or sits on a node
// impaired now or suspect to a Locker (owed its release); a value written
// before a fault that has healed, on a node that every Locker has heard
// answer, is stray unless a Locker closed meanwhile (check 3).
func (w *world) checkValues() {
	now := time.Now()
	for i, n := range w.nodes {
		for _, key := range w.p.keys {
			v, left, ok := n.Get(key)
			switch {
			case !ok:
			case v == driver.SharedValue: // each reader's value is in the readers set
				for r, left := range n.Readers(readersKey(key)) {
					w.checkValue(i, key, r, now.Add(left-modelTTL))
				}
			default:
				w.checkValue(i, key, v, now.Add(left-modelTTL))
			}
		}
	}
	w.checkSets()
}

// checkValue checks the value at key on node i, written at written.
func (w *world) checkValue(i int, key, v string, written time.Time) {
	now := time.Now()
	w.mu.Lock()
	owner, live := w.ownerLocked(key, v)
	excused := live || w.impairedLocked(i, now) || w.suspectLocked(i) ||
		w.impairedLocked(i, written) && w.closedSinceLocked(written.Add(-modelTTL))
	w.mu.Unlock()
	if owner == "" {
		owner = "no lock that a call returned: a failed round's, or a Do's"
	}
	if !excused {
		w.violate("stray value of %s on %s (%s), written at %v, on a node that is healthy and owes nothing; no running call owns it",
			key, w.p.names[i], owner, written.Sub(w.t0))
	}
}

// checkSets: no node holds a set's value on some of its keys and not on
// the others. Every script that writes a set's keys writes all or none
// (grant, extension, release), and they expire together, so a node never
// shows part of a set, whatever the faults (check 3).
func (w *world) checkSets() {
	w.mu.Lock()
	sets := maps.Clone(w.sets)
	w.mu.Unlock()
	for value, keys := range sets {
		for i, n := range w.nodes {
			if _, k := holds(n, holder{keys: keys}, value); k > 0 && k < len(keys) {
				w.mu.Lock()
				owner, _ := w.ownerLocked(keys[0], value)
				w.mu.Unlock()
				w.violate("partial grant: the value %.6s (%s) holds %d of the keys %q on %s",
					value, cmp.Or(owner, "a failed round's"), k, keys, w.p.names[i])
			}
		}
	}
}

// closedSinceLocked reports whether a Locker began closing at or after
// from: its owed releases may have died with it. w.mu is held.
func (w *world) closedSinceLocked(from time.Time) bool {
	return slices.ContainsFunc(w.lockers, func(ml *modelLocker) bool { return !ml.closing.IsZero() && !ml.closing.Before(from) })
}

// ownerLocked names the lock or Do call that value is known to belong to,
// if any, and says whether it may still be on the nodes: its owner holds
// it or is releasing it, or an acquiring call that may have written it
// runs. w.mu is held.
func (w *world) ownerLocked(key, value string) (owner string, live bool) {
	for _, r := range w.locks {
		if r.value == value {
			live = r.releasing > 0 || (!r.settled && r.released.IsZero()) || (!r.locker.closing.IsZero() && !r.locker.closed)
			return r.name + "'s", live
		}
	}
	for _, d := range w.dos {
		if d.value == value {
			return d.name + "'s", d.running
		}
	}
	return "", w.acquiring[key] > 0
}

// checkKeeper: each Locker keeps alive at most its held locks that were
// kept alive, and the locks of its running Do calls (check 4).
func (w *world) checkKeeper() {
	w.mu.Lock()
	locks, dos := slices.Clone(w.locks), slices.Clone(w.dos)
	w.mu.Unlock()
	for _, ml := range w.lockers {
		may := 0
		for _, r := range locks {
			w.mu.Lock()
			kept := r.locker == ml && r.keptAlive
			w.mu.Unlock()
			if kept && r.lock.Err() == nil {
				may++
			}
		}
		for _, d := range dos {
			w.mu.Lock()
			if d.locker == ml && d.running {
				may++
			}
			w.mu.Unlock()
		}
		if kept := ml.l.Stats().KeptAlive; kept > may {
			w.violate("L%d keeps %d locks alive, but only %d are held and kept alive", ml.id, kept, may)
		}
	}
}

// ---- The Lockers' view of the nodes and of time ----

// handle is one Locker's connection to a shared memory node: the Locker's
// Close closes the handle, not the node, and a call after that is a
// violation. It counts the release calls of each value (check 9).
//
// Core holds a lock's sync.Mutex while it releases, extends or renews the
// lock, and a goroutine blocked on a sync.Mutex is not durably blocked:
// the bubble's clock stops, and a holder waiting for a paused node's
// timeout would wait for ever. The test serialises the calls it makes
// (see claim), but not what core makes on its own: a Do's release, the
// releases of Close, the keeper's renewals. So releases and renewals (and
// the identity checks they may make) fail at once on a paused or slow
// node, where a real node makes them wait for the node timeout: the
// outcome is the same, a failed call. Extensions, acquisitions, fencing
// raises, wait queues and subscriptions wait.
type handle struct {
	*memory.Node
	w             *world
	locker, index int
	closed        atomic.Bool
}

var (
	errSlow = fmt.Errorf("model: a call under a lock's mutex to a paused or slow node: %w", context.DeadlineExceeded)
	// underMutex are the scripts core runs holding a lock's mutex that
	// the test cannot serialise, by SHA and by source ("batch": a renewal
	// batch).
	underMutex = func() map[string]bool {
		m := map[string]bool{"batch": true}
		for _, s := range driver.Scripts() {
			if releaseScripts[s.SHA()] || s.Name() == "identify" {
				m[s.SHA()], m[s.Source()] = true, true
			}
		}
		return m
	}()
	// releaseScripts are the release scripts of every kind, by SHA and by
	// source.
	releaseScripts = func() map[string]bool {
		m := map[string]bool{}
		for _, s := range []driver.Script{driver.ScriptRelease, driver.ScriptReleaseAll, driver.ScriptReleaseShared} {
			m[s.SHA()], m[s.Source()] = true, true
		}
		return m
	}()
	acquireAll = map[string]bool{driver.ScriptAcquireAll.SHA(): true, driver.ScriptAcquireAll.Source(): true}
)

func (h *handle) Close() error { h.closed.Store(true); return nil }

// enter admits a call: script is its SHA or source ("batch" for a batch).
func (h *handle) enter(script string, keys, args []string) error {
	if h.closed.Load() {
		h.w.violate("L%d called node %s after its Close", h.locker, h.Node)
		return memory.ErrClosed
	}
	h.countRelease(script, args)
	h.noteSet(script, keys, args)
	if underMutex[script] && h.w.slow(h.index) {
		return errSlow
	}
	return nil
}

// noteSet records the keys of a set's value when script is a grant of a
// set, of a failed round's too (see checkSets).
func (h *handle) noteSet(script string, keys, args []string) {
	if !acquireAll[script] || len(args) < 3 {
		return
	}
	n, err := strconv.Atoi(args[2])
	if err != nil || n < 1 || n > len(keys) {
		return
	}
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	h.w.sets[args[0]] = keys[:n:n]
}

// countRelease counts a call of script with args if it is a release.
func (h *handle) countRelease(script string, args []string) {
	if !releaseScripts[script] {
		return
	}
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	counts := h.w.releases[args[0]]
	for len(counts) <= h.index {
		counts = append(counts, 0)
	}
	counts[h.index]++
	h.w.releases[args[0]] = counts
}

func (h *handle) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := h.enter("", nil, nil); err != nil {
		return false, err
	}
	return h.Node.SetNX(ctx, key, value, ttl)
}

func (h *handle) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	if err := h.enter(sha, keys, args); err != nil {
		return nil, err
	}
	return h.Node.EvalSHA(ctx, sha, keys, args)
}

func (h *handle) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	if err := h.enter(script, keys, args); err != nil {
		return nil, err
	}
	return h.Node.Eval(ctx, script, keys, args)
}

// EvalBatch counts the releases a batch carries: owed releases go in
// batches (check 9).
func (h *handle) EvalBatch(ctx context.Context, calls []driver.Call) {
	for _, c := range calls {
		h.countRelease(c.SHA+c.Source, c.Args)
	}
	if err := h.enter("batch", nil, nil); err != nil {
		for i := range calls {
			calls[i].Err = err
		}
		return
	}
	h.Node.EvalBatch(ctx, calls)
}

func (h *handle) Watch(ctx context.Context, channel string, notify func(string)) (func(), error) {
	if err := h.enter("", nil, nil); err != nil {
		return nil, err
	}
	return h.Node.Watch(ctx, channel, notify)
}

// countingClock is the Lockers' clock: the system clock, which is fake in
// the bubble, counting the timers started (check 5) and the reads (for
// spinGuard).
type countingClock struct {
	driver.Clock
	w *world
}

func (c countingClock) Now() time.Time {
	c.w.spin.read()
	return c.Clock.Now()
}

func (c countingClock) NewTimer(d time.Duration) driver.Timer {
	c.w.wakes.Add(1)
	return c.Clock.NewTimer(d)
}

func (c countingClock) AfterFunc(d time.Duration, f func()) driver.Timer {
	c.w.wakes.Add(1)
	return c.Clock.AfterFunc(d, f)
}

// spinGuard finds a goroutine that spins: fake time does not move while
// it runs, so the program would hang. Once the clock has been read
// spinReads times at one fake instant, it prints the program and its log,
// and panics with the seed: the spinning goroutine's stack follows.
type spinGuard struct {
	w     *world
	mu    sync.Mutex
	at    time.Time
	reads int
}

func (g *spinGuard) read() {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !now.Equal(g.at) {
		g.at, g.reads = now, 0
	}
	if g.reads++; g.reads == spinReads {
		w := g.w
		w.mu.Lock()
		fmt.Fprintf(os.Stderr, "program:\n%s\nlog:\n%s\n", w.p, strings.Join(w.log, "\n"))
		w.mu.Unlock()
		panic(fmt.Sprintf("model seed %d: a goroutine spins: %d reads of a Locker's clock at %v without fake time moving (replay: QUORUMLOCK_MODEL_SEED=%d)",
			w.p.seed, spinReads, w.now(), w.p.seed))
	}
}
