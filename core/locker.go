package core

import (
	"context"
	"errors"
	"fmt"
	"github.com/quorumlock/quorumlock/core/driver"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Locker acquires Redlock locks over a fixed set of independent nodes.
// It is safe for concurrent use. Create it with New and Close it when done.
type Locker struct {
	nodes  []Node
	names  []string
	loaded []atomic.Uint32 // per node: bits of the scripts it has accepted
	ident  *identity       // which server each node is (identity.go)
	o      options

	keeper *keeper // kept-alive locks
	hub    *hub    // release-notice subscriptions
	wake   bool    // WithWakeOnRelease and the herald is a Watcher
	order  []int   // node indexes by name: the order a woken waiter asks in
	herald int     // order[0]: the node that publishes releases and queues waiters

	obs Observer // nil: none

	queueTTL  string // expiry of a wait queue, in milliseconds
	ttlMillis string // the TTL in milliseconds, for scripts

	guarded     []bool        // per node: the restart guard applies
	guardMin    time.Duration // the age from which a guarded node votes
	guardMillis string        // guardMin in milliseconds, for scripts

	yieldN  atomic.Int32 // len(yields), read without yieldMu
	yieldMu sync.Mutex
	yields  map[string]time.Time // keys this Locker handed to a waiter, until when it yields

	mu      sync.Mutex
	closed  bool
	closing chan struct{}      // closed by Close: wakes Acquire's retry waits
	busy    int                // calls in flight and holders (Lock.Hold) not done
	idle    chan struct{}      // closed once closed and busy is 0
	holds   map[*hold]struct{} // holders at work, cancelled by Close
	held    map[*Lock]struct{} // acquired, not yet released on a quorum
	closeMu sync.Mutex         // one Close finishes at a time
	done    bool               // Close has finished
}

// New returns a Locker over nodes, which must be independent Redis masters
// (or Redis Clusters): not replicas of each other, and each listed once.
// The Locker takes ownership of the nodes and closes them in Close.
//
// Node names (Node.String) are for people and for the herald's order, and
// must differ; they do not tell servers apart. Which server each node is,
// the Locker asks the server itself (IdentityKey) before the node's first
// yes counts: a server listed twice (through two drivers, or as localhost
// and 127.0.0.1) votes once, and the other node's outcomes fail with a
// *DuplicateNodeError.
//
// New validates every option and returns an error matching
// ErrInvalidArgument for any mistake, such as no nodes, a nil node, two nodes
// with the same name, or an impossible quorum.
func New(nodes []Node, opts ...Option) (*Locker, error) {
	if len(nodes) == 0 {
		return nil, invalid("no nodes")
	}
	names := make([]string, len(nodes))
	seen := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if driver.IsNil(n) {
			return nil, invalid("node %d is nil", i)
		}
		names[i] = n.String()
		if j, dup := seen[names[i]]; dup {
			return nil, invalid("nodes %d and %d are both %q: one server counted twice breaks the quorum", j, i, names[i])
		}
		seen[names[i]] = i
	}
	o := defaultOptions()
	for i, opt := range opts {
		if opt == nil {
			return nil, invalid("option %d is nil", i)
		}
		opt.apply(&o)
	}
	if err := o.validate(len(nodes)); err != nil {
		return nil, err
	}
	l := &Locker{
		nodes:   append([]Node(nil), nodes...),
		names:   names,
		loaded:  make([]atomic.Uint32, len(nodes)),
		ident:   newIdentity(len(nodes)),
		o:       o,
		closing: make(chan struct{}),
		idle:    make(chan struct{}),
		holds:   make(map[*hold]struct{}),
		held:    make(map[*Lock]struct{}),
	}
	l.keeper, l.hub = newKeeper(l), newHub(l)
	l.order = make([]int, len(names))
	for i := range l.order {
		l.order[i] = i
	}
	slices.SortFunc(l.order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	l.herald = l.order[0]
	_, watcher := nodes[l.herald].(driver.Watcher)
	l.wake = o.wake && watcher
	queueTTL := o.ttl
	if queueTTL <= math.MaxInt64/queueTTLFactor {
		queueTTL *= queueTTLFactor
	}
	l.queueTTL = millis(max(queueTTL, time.Second))
	l.ttlMillis = millis(o.ttl)
	switch len(o.observers) {
	case 0:
	case 1:
		l.obs = o.observers[0]
	default:
		l.obs = observers(slices.Clone(o.observers))
	}
	l.yields = make(map[string]time.Time)
	if o.guard > 0 {
		l.guarded = make([]bool, len(nodes))
		watched := false
		for i, n := range nodes {
			s, ok := n.(driver.Sharded)
			l.guarded[i] = !ok || !s.Sharded()
			watched = watched || l.guarded[i]
		}
		if !watched && o.guardSet {
			return nil, invalid("the restart guard (WithRestartGuard) cannot watch any of these nodes: all are sharded (Redis Clusters); use WithoutRestartGuard")
		}
		if !watched {
			l.guarded = nil
		}
		l.guardMin = (o.guard + o.driftFor(o.guard)).Truncate(time.Millisecond)
		l.guardMillis = millis(l.guardMin)
	}
	return l, nil
}

// errZeroLocker is the error of a nil or zero Locker's methods.
var errZeroLocker = invalid("nil or zero Locker: make one with core.New")

// zero reports whether l is nil or was not made by New.
func (l *Locker) zero() bool { return l == nil || l.nodes == nil }

// RestartGuard returns the age from which a node votes under the restart
// guard (its max TTL plus the drift allowance), or 0 when the guard is off.
func (l *Locker) RestartGuard() time.Duration {
	if l.guarded == nil {
		return 0
	}
	return l.guardMin
}

// Adopt tells the restart guard that the named nodes (all the nodes it
// watches when no name is given) hold no lock, so that they vote at once:
// it sets their birth key (BirthKey) to 0. Use it on a first deployment,
// or for a node brought back after more than the guard's max TTL down,
// never for a node that may have restarted while locks were held on it:
// that is the case the guard exists for. Nodes the guard does not watch
// (sharded ones, or all when it is off) are left alone.
//
// Each node's call is bounded by ctx and the node timeout. The error names
// every node that failed (the others are adopted), and an unknown name is
// an ErrInvalidArgument.
func (l *Locker) Adopt(ctx context.Context, nodes ...string) error {
	if l.zero() {
		return errZeroLocker
	}
	if ctx == nil {
		return invalid("context is nil")
	}
	if !l.enter(nil) {
		return fmt.Errorf("quorumlock: adopt: %w", ErrClosed)
	}
	defer l.leave(nil)
	pick := make([]bool, len(l.nodes))
	if len(nodes) == 0 {
		for i := range pick {
			pick[i] = true
		}
	}
	for _, name := range nodes {
		i := slices.Index(l.names, name)
		if i < 0 {
			return invalid("adopt: no node is named %q", name)
		}
		pick[i] = true
	}
	errs := make([]error, len(l.nodes))
	var wg sync.WaitGroup
	for i := range l.nodes {
		if !pick[i] || l.guarded == nil || !l.guarded[i] {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, l.o.nodeTimeout)
			defer cancel()
			if _, err := l.eval(cctx, i, driver.ScriptAdopt, []string{driver.BirthKey}, nil); err != nil {
				errs[i] = fmt.Errorf("node %s: %w", l.names[i], err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("quorumlock: adopt: %w", err)
	}
	return nil
}

// TTL returns the lock time-to-live on the nodes.
func (l *Locker) TTL() time.Duration { return l.o.ttl }

// Quorum returns how many nodes must grant a lock.
func (l *Locker) Quorum() int { return l.o.quorum }

// Drift returns the time set aside for clock drift: TTL x drift factor + 2 ms.
func (l *Locker) Drift() time.Duration { return l.o.drift() }

// String describes the Locker's nodes and configuration.
func (l *Locker) String() string {
	return fmt.Sprintf("quorumlock.Locker{nodes=%v %s}", l.names, &l.o)
}

// Acquire takes the lock on key: it makes rounds until one wins a quorum
// with validity left, the tries run out (WithTries), ctx ends or the Locker
// is closed, waiting between rounds as the retry policy says.
//
// On failure it returns a *QuorumError from the last round, matching
// ErrNotAcquired (contention), ErrUnavailable (outage) or
// ErrValidityExpired, and also context.Canceled or context.DeadlineExceeded
// when ctx ended. Bad input matches ErrInvalidArgument, and a closed Locker
// ErrClosed. After a failed round every node is released, even when ctx
// has ended, so that no stray key of the attempt outlives it.
func (l *Locker) Acquire(ctx context.Context, key string) (*Lock, error) {
	if l.zero() {
		return nil, errZeroLocker
	}
	return l.acquire(ctx, key, l.o.tries)
}

// TryAcquire makes one round to take the lock on key, without waiting or
// retrying. Its errors are those of Acquire.
func (l *Locker) TryAcquire(ctx context.Context, key string) (*Lock, error) {
	if l.zero() {
		return nil, errZeroLocker
	}
	return l.acquire(ctx, key, tryOnce)
}

// tryOnce is TryAcquire's number of tries: one round, and no wait for
// nodes too young to vote (Acquire's tries are at least 1).
const tryOnce = 0

func (l *Locker) acquire(ctx context.Context, key string, tries int) (*Lock, error) {
	if l.obs == nil {
		return l.acquireLoop(ctx, key, tries)
	}
	start := l.o.clock.Now()
	lock, err := l.acquireLoop(ctx, key, tries)
	l.observeAcquire(ctx, key, start, lock, err)
	return lock, err
}

func (l *Locker) acquireLoop(ctx context.Context, key string, tries int) (*Lock, error) {
	if key == "" {
		return nil, invalid("key is empty")
	}
	if ctx == nil {
		return nil, invalid("context is nil")
	}
	if !l.enter(nil) {
		return nil, l.closedError(OpAcquire, key)
	}
	defer l.leave(nil)

	rkey := l.o.keyPrefix + key
	switch rkey {
	case driver.BirthKey:
		return nil, invalid("key %q is reserved for the restart guard (BirthKey)", rkey)
	case driver.IdentityKey:
		return nil, invalid("key %q is reserved for the servers' identities (IdentityKey)", rkey)
	}
	var fence string
	if l.o.fencing {
		var ok bool
		if fence, ok = driver.FenceKey(rkey); !ok {
			name := strconv.Quote(key)
			if l.o.keyPrefix != "" {
				name += " (with the key prefix: " + strconv.Quote(rkey) + ")"
			}
			return nil, invalid("key %s has no hash tag and contains \"}\", so no fencing counter can share its cluster slot (see FenceKey); put the key in a hash tag, such as {%s}", name, key)
		}
	}
	var last *QuorumError
	var w *watch // the key's release notices, after a round lost to a holder
	var me *waiter
	// A key whose wait queue cannot share its cluster slot has no queue:
	// its waiters poll, since no release would hand it to them.
	qkey, hasQueue := driver.QueueKey(rkey)
	handoff := l.wake && hasQueue
	var woken wakeKind // what woke the waiter for this round
	// A Locker that just handed this key to a queued waiter does not race
	// that waiter for it: it queues behind it instead (force), without a
	// round first (skip).
	force := handoff && tries > 1 && l.yielding(rkey)
	skip := force
	frees := 0 // rounds in a row after which the queue found the lock free
	defer func() {
		if w != nil {
			l.dequeue(ctx, me, qkey)
			l.hub.leave(w, me)
		}
	}()
	// rounds counts every round, for the error's Tries; counted leaves
	// out the follow-ups of a lock found free on the herald (the retry at
	// once, and the short pauses after a notice), which are part of the
	// wake that led to them: they use up neither the tries nor the retry
	// policy's steps.
	rounds, counted := 0, 0
	followUp := false
	// guard is the wait for nodes too young to vote after a round they
	// left without a quorum, guarded the sum of those waits.
	var guard, guarded time.Duration
	// A follow-up is started by the wake of the round it follows (chain):
	// one that a notice started must not announce its clean-up either, or
	// waiters woken by each other's clean-ups would go on waking each
	// other while a holder the herald does not know of keeps the lock. A
	// chain a notice started is also the only one that pauses briefly.
	chain := wokenByNothing
	for {
		if err := contextError(ctx); err != nil {
			if last == nil {
				last = l.notTried(OpAcquire, key, errNoNodeAsked)
			}
			last.Context = err
			return nil, last
		}
		if !skip {
			if w != nil {
				// Queued before the round, so that a release during it counts.
				l.hub.arm(w, me)
			}
			rounds++
			if !followUp {
				counted++
			}
			followUp = false
			lock, qe, handed := l.acquireOnce(ctx, key, rkey, fence, woken)
			chain, woken = woken, wokenByNothing
			if w != nil {
				l.hub.roundOver(w, me, qe == nil)
			}
			if qe == nil {
				lock.tries = rounds
				return l.register(lock)
			}
			qe.Tries = rounds
			last = qe
			if guard = l.guardDelay(ctx, qe, tries, &guarded); guard > 0 {
				counted-- // waiting for young nodes uses up no try
			}
			if qe.Context != nil || counted >= tries {
				return nil, qe
			}
			// A round whose clean-up handed the key on queues behind the
			// waiter it woke.
			force = handed
		}
		skip = false
		if handoff && (force || errors.Is(last.Reason, ErrNotAcquired)) {
			if w == nil {
				me = newWaiter()
				w = l.hub.join(rkey, me)
			}
			queued, free := l.enqueue(ctx, w, me, rkey, qkey, force)
			if queued {
				force = false
			}
			if !free {
				frees = 0
			} else if frees++; frees == 1 {
				followUp, woken = true, chain
				continue // released before the waiter could queue: try again now
			}
		} else {
			// Not lost to a holder (an outage, say): the short pauses of a
			// lock found free on the herald do not apply.
			frees = 0
		}
		var released <-chan struct{}
		delay := max(l.o.retry(max(counted, 1)), MinRetryDelay)
		if guard > 0 {
			delay, guard = guard, 0
		}
		if frees > 1 && chain != wokenByNothing {
			// Free on the herald again after a notice: the release that
			// woke this waiter may not have reached the other nodes yet
			// (the herald's notice can beat them), and it will tell no
			// one when it does. Try again soon, doubling the pause until
			// it would reach a node timeout (which bounds a release in
			// flight); then wait as usual. Without a notice, a lock free
			// on the herald is held elsewhere, by a holder the herald does
			// not know of, and polling faster would only load the nodes.
			if pause := MinRetryDelay << min(frees-2, 30); pause < l.o.nodeTimeout && pause < delay {
				delay, followUp = pause, true
			}
		}
		if w != nil {
			l.hub.arm(w, me)
			released = me.woken
		}
		timer := l.o.clock.NewTimer(delay)
		select {
		case <-timer.C():
			if followUp {
				woken = chain
			}
		case <-released:
			timer.Stop()
			followUp = false // a new wake
			named, activated := l.hub.takeWake(me)
			switch {
			case named:
				woken = wokenByTicket
			case activated:
				// The subscription is confirmed: queue now, and make a
				// round only if the queue finds the lock free.
				skip = true
			default:
				woken = wokenByNotice
			}
		case <-ctx.Done():
			timer.Stop()
		case <-l.closing:
			timer.Stop()
			if last == nil {
				return nil, l.closedError(OpAcquire, key)
			}
			return nil, errors.Join(l.closedError(OpAcquire, key), last)
		}
	}
}

// guardDelay returns how long Acquire waits before its next round when
// qe, its last round's error, says that nodes too young to vote (restart
// guard) left it without a quorum: until enough of them vote. It returns 0
// when Acquire should not wait for them: TryAcquire (tryOnce), a round
// lost otherwise, or once the waits (*guarded, which it adds to) reach the
// guard's minimum age, which a server whose clock runs forward cannot
// need. It reports the wait to the Observer (EventWait).
func (l *Locker) guardDelay(ctx context.Context, qe *QuorumError, tries int, guarded *time.Duration) time.Duration {
	if qe.Reason != ErrNodeRestarted || qe.Context != nil || tries == tryOnce || *guarded >= l.guardMin {
		return 0
	}
	wait, _ := guardWait(qe.Nodes, qe.Quorum)
	wait += MinRetryDelay // ages are whole milliseconds
	*guarded += wait
	if l.obs != nil {
		l.obs.Observe(ctx, Event{Kind: EventWait, Key: qe.Key, Start: l.o.clock.Now(), Duration: wait,
			Err: qe, Nodes: qe.Nodes, Tries: qe.Tries})
	}
	return wait
}

// wakeKind says what started a round of Acquire.
type wakeKind uint8

const (
	wokenByNothing wakeKind = iota // the first round, a retry delay or a free lock
	wokenByNotice                  // an empty release notice, which may have woken others
	wokenByTicket                  // the waiter's own ticket: it alone was woken
)

// queueTTLFactor sets how long a wait queue outlives its last addition,
// in TTLs: the tickets of waiters that vanished without leaving the queue
// (a crashed process) are gone by then.
const queueTTLFactor = 4

// enqueue puts me's ticket in the key's wait queue on the herald, behind
// the waiters already there; with force, even if the lock is free. It
// reports queued when it did, and free when the lock was free, so that
// nothing was queued: the caller should try again at once. It does nothing
// (neither) when w's subscription is not confirmed yet (the confirmation
// wakes the waiter to queue then), the herald failed, or me is already
// queued. A key without a queue (QueueKey's ok false) never gets here.
func (l *Locker) enqueue(ctx context.Context, w *watch, me *waiter, rkey, qkey string, force bool) (queued, free bool) {
	ticket, ok := l.hub.newTicket(w, me)
	if !ok {
		return l.hub.hasTicket(me), false
	}
	mode := ""
	if force {
		mode = "force"
	}
	cctx, cancel := context.WithTimeout(ctx, l.o.nodeTimeout)
	// One run only: the script is not idempotent, and a ticket queued
	// twice would be popped twice.
	a, err := l.scriptAnswerOnce(cctx, l.herald, driver.ScriptEnqueue, []string{rkey, qkey}, []string{ticket, l.queueTTL, mode})
	cancel()
	if err != nil || a == 0 {
		// A call that failed may have queued it: a notice for a dropped
		// ticket wakes the Locker's longest waiting waiter instead.
		l.hub.dropTicket(me)
	}
	return err == nil && a == 1, err == nil && a == 0
}

// dequeue takes me's ticket out of the wait queue, if it is still there,
// when Acquire returns: otherwise a release would hand the key to no one.
func (l *Locker) dequeue(ctx context.Context, me *waiter, qkey string) {
	ticket := l.hub.dropTicket(me)
	if ticket == "" {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.o.nodeTimeout)
	_, _ = l.scriptAnswerOnce(cctx, l.herald, driver.ScriptDequeue, []string{qkey}, []string{ticket})
	cancel()
}

// handedOver records that this Locker's release handed rkey to a queued
// waiter: for a moment, an Acquire of rkey here queues behind that waiter
// instead of racing it (see yielding).
func (l *Locker) handedOver(rkey string) {
	now := l.o.clock.Now()
	l.yieldMu.Lock()
	defer l.yieldMu.Unlock()
	if len(l.yields) >= maxYields {
		for k, until := range l.yields {
			if !now.Before(until) {
				delete(l.yields, k)
			}
		}
	}
	if len(l.yields) < maxYields {
		l.yields[rkey] = now.Add(l.o.nodeTimeout)
	}
	l.yieldN.Store(int32(len(l.yields)))
}

// maxYields bounds the keys a Locker remembers having handed over.
const maxYields = 1024

// yielding reports whether this Locker handed rkey to a queued waiter
// within the last node timeout, and forgets it: the waiter needs that
// long at most to take the lock, and a caller that takes the key again at
// once would otherwise win every race against it (the waiter first has to
// hear of the release), keeping the lock to itself.
func (l *Locker) yielding(rkey string) bool {
	if l.yieldN.Load() == 0 {
		return false
	}
	l.yieldMu.Lock()
	defer l.yieldMu.Unlock()
	until, ok := l.yields[rkey]
	if !ok {
		return false
	}
	delete(l.yields, rkey)
	l.yieldN.Store(int32(len(l.yields)))
	return l.o.clock.Now().Before(until)
}

// Stats is a snapshot of a Locker's activity, for metrics and tests.
type Stats struct {
	// Held is the number of locks acquired and not yet released on a
	// quorum (a lost lock counts until its Release, and a lock whose
	// Release failed until one succeeds or Close).
	Held int
	// KeptAlive is the number of locks the keep-alive machinery extends.
	KeptAlive int
	// RenewalTicks counts the keep-alive's renewal batches since New: each
	// sends every due lock's extension to each node, in one round trip on
	// a node that is a Batcher.
	RenewalTicks uint64
	// Renewals counts the lock extensions those batches carried.
	Renewals uint64
	// Watching is the number of keys whose release notices the Locker is
	// subscribed to, for its waiters.
	Watching int
}

// Stats returns a snapshot of the Locker's activity.
func (l *Locker) Stats() Stats {
	l.mu.Lock()
	held := len(l.held)
	l.mu.Unlock()
	return Stats{
		Held:         held,
		KeptAlive:    l.keeper.count(),
		RenewalTicks: l.keeper.ticks.Load(),
		Renewals:     l.keeper.renewals.Load(),
		Watching:     l.hub.count(),
	}
}

// Do runs fn under the lock on key: it acquires the lock as Acquire does,
// holds it while fn runs (see Lock.Hold: kept alive, and never released by
// Close while fn runs), and releases it when fn returns or panics. The
// context fn receives is cancelled the moment the lock ends (lost, or past
// its validity), with the lock's Err as its cause (context.Cause), or when
// the Locker is closing (a cause matching ErrClosed); fn must stop using
// the protected resource then.
//
// Do returns Acquire's error if the lock was not taken (fn did not run);
// otherwise fn's error joined with the lock's: the cause if the lock was
// lost while fn ran, or Release's error, and ErrClosed when Close cut fn
// short.
func (l *Locker) Do(ctx context.Context, key string, fn func(ctx context.Context) error) (err error) {
	if l.zero() {
		return errZeroLocker
	}
	if ctx == nil {
		return invalid("context is nil")
	}
	if fn == nil {
		return invalid("fn is nil")
	}
	lock, err := l.Acquire(ctx, key)
	if err != nil {
		return err
	}
	fctx, done, err := lock.Hold(ctx)
	if err != nil {
		return errors.Join(err, lock.Release(ctx))
	}
	defer func() {
		cause, lost := context.Cause(fctx), lock.Err()
		rerr := lock.Release(ctx)
		done()
		if lost != nil {
			err = errors.Join(err, lost)
		} else if rerr != nil {
			err = errors.Join(err, rerr)
		}
		if errors.Is(cause, ErrClosed) {
			err = errors.Join(err, cause)
		}
	}()
	return fn(fctx)
}

// leaderRound is the round of a waiter woken by a release notice. Every
// Locker's woken waiter runs at once after a release; asking every node at
// once, they would split the nodes' votes so that often none of them wins
// (measured: 16 Lockers on 3 nodes made 4 times fewer acquisitions per
// second than by polling). Instead it asks the nodes one by one in the
// order of their names, the same for every Locker, until one answers: if
// that node refuses, the race is lost there; if it grants, the round asks
// the others, which the losers are not asking, under the Locker's
// strategy (nodes that failed before it are asked again). Its results are
// those of every node it asked, and a lost leader round is cleaned up like
// any other: a node whose reply was lost may hold the key.
func (l *Locker) leaderRound(ctx context.Context, call nodeCall) []NodeResult {
	results := l.blankResults()
	for _, i := range l.order {
		if ctx.Err() != nil {
			break
		}
		actx, cancel := context.WithTimeout(ctx, l.o.nodeTimeout)
		granted := l.attempt(ctx, actx, i, call, &results[i])
		cancel()
		switch {
		case results[i].Outcome != OutcomeRefused && !granted:
			continue
		case !granted:
			return results
		}
		leader := i
		return l.round(ctx, l.o.strategy, func(ctx context.Context, i int) (bool, error) {
			if i == leader {
				return true, nil
			}
			return call(ctx, i)
		})
	}
	return l.round(ctx, l.o.strategy, call)
}

// acquireOnce is one round of the Redlock algorithm, with the fencing
// step when fence (the counter key) is set.
//
// A round that follows an empty release notice is a leaderRound. Every
// failed round, of every kind, releases every node. A round that follows
// any notice does not announce its clean-up (see below).
//
// It also reports whether its clean-up handed the key to a queued waiter.
func (l *Locker) acquireOnce(ctx context.Context, key, rkey, fence string, woken wakeKind) (*Lock, *QuorumError, bool) {
	value := newValue()
	ttl := l.o.ttl
	start := l.o.clock.Now()
	call, counters := l.acquireCall(rkey, fence, value)

	var results []NodeResult
	if woken == wokenByNotice && len(l.nodes) > 1 {
		results = l.leaderRound(ctx, call)
	} else {
		results = l.round(ctx, l.o.strategy, call)
	}
	ok, refused, failed := tally(results)
	var token int64
	var fenceErr *QuorumError
	if fence != "" && ok >= l.o.quorum {
		token, fenceErr = l.raiseFence(ctx, key, fence, results, counters)
	}
	validity := ttl - l.o.clock.Now().Sub(start) - l.o.drift()
	if ok >= l.o.quorum && validity > 0 && fenceErr == nil {
		lock := &Lock{locker: l, key: key, rkey: rkey, value: value, token: token, taken: start, deadline: start.Add(ttl - l.o.drift())}
		if l.obs != nil {
			lock.nodes = results // kept for the Observer only
		}
		return lock, nil, false
	}

	// Redlock rule 5: release every node, including those whose answer was
	// lost or refused (a driver's own retry can turn a landed SET into a
	// refusal), and do it even when ctx has ended. When the round set the
	// key somewhere, the release notices go out: waiters that lost to this
	// round's keys (a split vote leaves no holder) must not sleep out their
	// retry delay for a lock no one holds.
	// Only a round that no notice started announces it, though: rounds
	// that notices start and whose clean-ups start others could go on
	// waking each other while a holder the herald does not know of keeps
	// the lock.
	_, handed := l.releaseAll(detached(ctx), rkey, value, ok > 0 && woken == wokenByNothing, nil)
	if fenceErr != nil {
		fenceErr.Context = contextError(ctx)
		return nil, fenceErr, handed
	}

	qe := &QuorumError{Op: OpAcquire, Key: key, Quorum: l.o.quorum, Nodes: results, Validity: validity, Context: contextError(ctx)}
	_, young := guardWait(results, l.o.quorum)
	switch {
	case ok >= l.o.quorum:
		qe.Reason = ErrValidityExpired
	case young:
		// Without a quorum because nodes are too young to vote: Acquire
		// waits for them (see guardDelay).
		qe.Reason = ErrNodeRestarted
	case failed > len(l.nodes)-l.o.quorum, ok+refused+failed == 0 && ctx.Err() == nil:
		// Too many failures, or a round whose node timeout ran out before
		// it could ask anyone (a starved process): not a holder's doing.
		qe.Reason = ErrUnavailable
	default:
		qe.Reason = ErrNotAcquired
	}
	return nil, qe, handed
}

// acquireCall is what a round of acquisition asks node i: SET NX PX;
// with fencing, ScriptAcquireFenced, whose answer is the node's counter
// (stored in the returned counters); and on the nodes the restart guard
// watches, ScriptAcquireGuarded, which does either and whose negative
// answer is a young node's age.
func (l *Locker) acquireCall(rkey, fence, value string) (nodeCall, []int64) {
	ttl := l.o.ttl
	if fence == "" && l.guarded == nil {
		return func(ctx context.Context, i int) (bool, error) {
			return l.nodes[i].SetNX(ctx, rkey, value, ttl)
		}, nil
	}
	var counters []int64
	var fenced, guarded []string // the scripts' keys
	args := []string{value, l.ttlMillis, l.guardMillis}
	if fence != "" {
		counters = make([]int64, len(l.nodes))
		fenced = []string{rkey, fence}
	}
	if l.guarded != nil {
		guarded = []string{rkey, driver.BirthKey, fence}
		if fence == "" {
			guarded = guarded[:2]
		}
	}
	return func(ctx context.Context, i int) (bool, error) {
		s, keys, a := driver.ScriptAcquireGuarded, guarded, args
		if l.guarded == nil || !l.guarded[i] {
			if fence == "" {
				return l.nodes[i].SetNX(ctx, rkey, value, ttl)
			}
			s, keys, a = driver.ScriptAcquireFenced, fenced, args[:2]
		}
		reply, err := l.eval(ctx, i, s, keys, a)
		if err != nil {
			return false, err
		}
		c, ok := reply.(int64)
		switch {
		case !ok && reply != nil:
			return false, fmt.Errorf("quorumlock: unexpected reply %#v to the %s script", reply, s.Name())
		case c < 0:
			return false, &RestartGuardError{Age: time.Duration(-1-c) * time.Millisecond, MinAge: l.guardMin}
		case counters != nil:
			counters[i] = c
		}
		return c > 0, nil
	}, counters
}

// notTried is the error of an operation that did not get to ask any node.
func (l *Locker) notTried(op Op, key string, reason error) *QuorumError {
	return &QuorumError{Op: op, Key: key, Quorum: l.o.quorum, Reason: reason, Nodes: l.blankResults()}
}

func (l *Locker) closedError(op Op, key string) error {
	return fmt.Errorf("quorumlock: %s %q: %w", op, key, ErrClosed)
}

// enter registers a call that Close must wait for, and h, when not nil,
// a holder that Close cancels first; it reports false once the Locker is
// closing. The caller must leave with the same h.
func (l *Locker) enter(h *hold) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.busy++
	if h != nil {
		l.holds[h] = struct{}{}
	}
	return true
}

// leave ends what enter began.
func (l *Locker) leave(h *hold) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h != nil {
		delete(l.holds, h)
	}
	if l.busy--; l.busy == 0 && l.closed {
		close(l.idle)
	}
}

// register records a newly acquired lock so that Close can release it.
func (l *Locker) register(lock *Lock) (*Lock, error) {
	l.mu.Lock()
	if !l.closed {
		l.held[lock] = struct{}{}
		l.mu.Unlock()
		return lock, nil
	}
	l.mu.Unlock()
	err := lock.release(context.Background())
	return nil, errors.Join(l.closedError(OpAcquire, lock.key), err)
}

func (l *Locker) unregister(lock *Lock) {
	l.mu.Lock()
	delete(l.held, lock)
	l.mu.Unlock()
}

func (l *Locker) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// errClosing is the cause with which Close cancels the contexts of
// holders at work (Lock.Hold, Do).
var errClosing = fmt.Errorf("quorumlock: the Locker is closing: %w", ErrClosed)

// Close stops the Locker and waits as long as it takes: it is Shutdown
// without a bound. Use Shutdown to bound the wait for holders (Do
// functions, Lock.Hold) that do not stop when their context is cancelled.
// A holder must not call Close itself (nor Shutdown without a bound): it
// would wait for its own return.
func (l *Locker) Close() error {
	if l.zero() {
		return errZeroLocker
	}
	return l.Shutdown(context.Background())
}

// Shutdown stops the Locker. New calls fail with ErrClosed; an Acquire
// waiting to retry returns ErrClosed; the contexts of holders at work (Do
// functions, Lock.Hold) are cancelled with a cause matching ErrClosed.
// It then waits, until ctx ends, for those holders to finish and for the
// calls in flight to return: a lock is never released while its holder
// still works. Then it releases every lock still held and closes the
// nodes, and returns the errors of those releases and closes.
//
// When ctx ends first, Shutdown returns an error matching ctx's, leaves
// the holders' locks held (kept alive) and the nodes open; call Shutdown
// or Close again to finish. Once finished, later calls return nil.
func (l *Locker) Shutdown(ctx context.Context) error {
	if l.zero() {
		return errZeroLocker
	}
	if ctx == nil {
		return invalid("context is nil")
	}
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.closing)
		for h := range l.holds {
			h.cancel(errClosing)
		}
		if l.busy == 0 {
			close(l.idle)
		}
	}
	l.mu.Unlock()
	select {
	case <-l.idle:
	case <-ctx.Done():
		l.mu.Lock()
		busy := l.busy
		l.mu.Unlock()
		return fmt.Errorf("quorumlock: shutdown: holders or calls still running: %d, their locks kept; call Shutdown or Close again to finish: %w",
			busy, contextError(ctx))
	}
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	if l.done {
		return nil
	}
	l.done = true
	return l.finishClose()
}

// finishClose releases the locks still held, stops the keeper and the
// subscriptions, and closes the nodes.
func (l *Locker) finishClose() error {
	l.mu.Lock()
	held := make([]*Lock, 0, len(l.held))
	for lock := range l.held {
		held = append(held, lock)
	}
	l.mu.Unlock()

	var errs []error
	for _, lock := range held {
		// A lock already known lost is still released, for the keys it may
		// have left, and so is one whose Release failed (tried again), but
		// what that finds is no news: it was reported.
		news := lock.Err() == nil
		if err := lock.release(context.Background()); err != nil && news && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	l.keeper.idle()
	l.hub.close()
	for i, n := range l.nodes {
		if err := n.Close(); err != nil {
			errs = append(errs, fmt.Errorf("quorumlock: closing node %d %s: %w", i, l.names[i], err))
		}
	}
	return errors.Join(errs...)
}
