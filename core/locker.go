package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// Locker acquires Redlock locks over a fixed set of independent nodes.
// It is safe for concurrent use. Create it with New and Close it when done.
type Locker struct {
	nodes  []Node
	names  []string
	loaded []atomic.Uint32 // per node: bits of the scripts it has accepted
	ident  *identity       // which server each node is (identity.go)
	o      options

	keeper  *keeper  // kept-alive locks
	hub     *hub     // release-notice subscriptions
	health  *health  // node health (health.go)
	suspect suspects // the suspect nodes, marked by health
	wake    bool     // WithWakeOnRelease and the herald is a Watcher
	order   []int    // node indexes by name: the order a woken waiter asks in
	herald  int      // order[0]: the herald while no node is suspect (heraldNow)

	obs   Observer  // nil: none
	hooks []starter // the Observers' start hooks (observer.go)

	queueTTL  string // expiry of a wait queue, in milliseconds
	ttlMillis string // the TTL in milliseconds, for scripts
	// markMillis is how long a lost round's mark that a writer waits
	// behind shared holders lasts (markTTL), in milliseconds.
	markMillis string

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
	// finished is closed when the last step of Close (finishClose),
	// started once, has ended; finishErr is its error until a Close or
	// Shutdown returns it.
	finished  chan struct{}
	finishErr error
}

// New returns a Locker over nodes, which must be independent Redis masters
// (or Redis Clusters): not replicas of each other, and each listed once.
// The Locker takes ownership of the nodes and closes them in Close. Node
// names must differ; a server listed twice under two names still votes
// once (ErrDuplicateNode).
//
// New validates every option and returns an error matching
// ErrInvalidArgument for any mistake, such as no nodes, a nil node, two nodes
// with the same name, or an impossible quorum.
func New(nodes []Node, opts ...Option) (*Locker, error) {
	names, err := nodeNames(nodes)
	if err != nil {
		return nil, err
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
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
		yields:  make(map[string]time.Time),
	}
	l.suspect = make(suspects, len(nodes))
	l.keeper = newKeeper(l.keeperDeps())
	l.hub = newHub(hubDeps{nodes: l.nodes, clock: o.clock, nodeTimeout: o.nodeTimeout, herald: l.heraldNow})
	l.health = newHealth(l.healthDeps())
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
	l.markMillis = millis(markTTL(o.ttl))
	l.obs, l.hooks = observing(o.observers)
	if err := l.setGuard(); err != nil {
		return nil, err
	}
	return l, nil
}

// keeperDeps is what the keeper uses of l.
func (l *Locker) keeperDeps() keeperDeps {
	return keeperDeps{
		clock:       l.o.clock,
		ttl:         l.o.ttl,
		drift:       l.o.drift(),
		keepAlive:   l.o.keepAlive,
		retry:       l.o.keepAliveRetry,
		nodeTimeout: l.o.nodeTimeout,
		maxHold:     l.o.maxHold,
		closed:      l.isClosed,
		extend:      l.extendAll,
	}
}

// healthDeps is what the health uses of l; l.hub is made.
func (l *Locker) healthDeps() healthDeps {
	return healthDeps{
		nodes:       l.nodes,
		names:       l.names,
		clock:       l.o.clock,
		nodeTimeout: l.o.nodeTimeout,
		marks:       l.suspect,
		sharded:     l.sharded,
		moved:       l.hub.heraldMoved,
		identify: func(ctx context.Context, i int) error {
			return l.identify(ctx, i, l.ident.state[i].Load())
		},
		sendOwed: func(ctx context.Context, i int, owed []*owedEntry) error {
			b, _ := l.nodes[i].(driver.Batcher)
			return l.releaseOwed(ctx, i, b, owed)
		},
	}
}

// nodeNames returns the nodes' names, or refuses an empty list, a nil
// node, or a name given twice.
func nodeNames(nodes []Node) ([]string, error) {
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
	return names, nil
}

// errZeroLocker is the error of a nil or zero Locker's methods.
var errZeroLocker = invalid("nil or zero Locker: make one with core.New")

// zero reports whether l is nil or was not made by New.
func (l *Locker) zero() bool { return l == nil || l.nodes == nil }

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

// Stats is a snapshot of a Locker's activity, for metrics and tests.
type Stats struct {
	// Held is the number of locks acquired and not yet released on a
	// quorum (a lost lock, or one whose Release failed, counts until then).
	Held int
	// KeptAlive is the number of locks the keep-alive machinery extends.
	KeptAlive int
	// RenewalTicks counts the keep-alive's renewal batches since New (one
	// round trip per node on Batcher nodes).
	RenewalTicks uint64
	// Renewals counts the lock extensions those batches carried.
	Renewals uint64
	// Watching is the number of keys whose release notices it subscribes to.
	Watching int
	// Suspect names the nodes that rounds do not ask for now, because a
	// call to them timed out or could not connect (ErrNodeSuspect).
	Suspect []string
	// Owed is the number of releases owed to suspect nodes, sent once they
	// answer again (ErrNodeSuspect). After Close, the releases its last
	// try could not send: their keys expire at their TTL.
	Owed int
	// Duplicate names the nodes found to be the same server as another
	// node (ErrDuplicateNode): they do not vote, so the Locker tolerates
	// fewer failures than its node count says. List each server once.
	Duplicate []string
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
		Suspect:      l.health.suspects(),
		Owed:         l.health.owedCount(),
		Duplicate:    l.duplicates(),
	}
}

// Do runs fn under the lock on key: it acquires the lock as Acquire does,
// holds it while fn runs (Lock.Hold: kept alive, and never released by
// Close while fn runs), and releases it when fn returns or panics. fn's
// context is cancelled when the lock ends, with the lock's Err as its
// cause, or when the Locker is closing (a cause matching ErrClosed); fn
// must stop using the protected resource then. When extensions fail, the
// lock ends at risk (ErrLockAtRisk), with the at-risk margin of validity
// left (WithAtRiskMargin, TTL/5 by default): the time fn has to stop.
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

// notTried is the error of an operation that did not get to ask any node.
func (l *Locker) notTried(op Op, key string, reason error) *QuorumError {
	return &QuorumError{Op: op, Key: key, Quorum: l.o.quorum, Reason: reason, Nodes: l.blankResults()}
}

func (l *Locker) closedError(op Op, key string) error {
	return fmt.Errorf("quorumlock: %s %q: %w", op, key, ErrClosed)
}

// enter registers a call that Close waits for (and h, a holder it cancels
// first); false once the Locker is closing. Leave with the same h.
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

func (l *Locker) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// errClosing is the cause with which Close cancels holders' contexts.
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
// functions, Lock.Hold) are cancelled with a cause matching ErrClosed. It
// waits, until ctx ends, for those holders and the calls in flight, then
// releases every lock still held, gives the releases owed to suspect
// nodes a last try (at most five node timeouts), closes the nodes, and
// returns the errors of those releases and closes.
//
// When ctx ends first, Shutdown returns an error matching ctx's. If
// holders were still at work, their locks stay held (kept alive) and the
// nodes open; if the last step had begun, it goes on, bounded as above.
// Call Shutdown or Close again to finish, or to wait for the end. Once
// finished, later calls return nil.
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
	return l.finish(ctx)
}

// finish starts the last step of Close (finishClose), once, and waits for
// it until ctx ends. It returns finishClose's error once, then nil.
func (l *Locker) finish(ctx context.Context) error {
	l.mu.Lock()
	if l.finished == nil {
		finished := make(chan struct{})
		l.finished = finished
		go func() {
			err := l.finishClose()
			l.mu.Lock()
			l.finishErr = err
			l.mu.Unlock()
			close(finished)
		}()
	}
	finished := l.finished
	l.mu.Unlock()
	select {
	case <-finished:
	case <-ctx.Done():
		select {
		case <-finished:
		default:
			return fmt.Errorf("quorumlock: shutdown: still releasing locks and closing nodes; call Shutdown or Close again to wait for the end: %w",
				contextError(ctx))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.finishErr
	l.finishErr = nil // returned once
	return err
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
		// Lost or failed locks are released too, but their errors are no news.
		news := lock.Err() == nil
		if err := lock.release(context.Background()); err != nil && news && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	l.keeper.waitIdle()
	l.hub.close()
	l.health.close()
	// In parallel: a driver may wait on a hung server before it lets go
	// (rueidis, about a second).
	closeErrs := make([]error, len(l.nodes))
	var wg sync.WaitGroup
	for i, n := range l.nodes {
		wg.Go(func() {
			if err := n.Close(); err != nil {
				closeErrs[i] = fmt.Errorf("quorumlock: closing node %d %s: %w", i, l.names[i], err)
			}
		})
	}
	wg.Wait()
	return errors.Join(append(errs, closeErrs...)...)
}
