package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"
)

// This file is the keeper: one goroutine per Locker, while it has
// kept-alive locks, extends the due ones together and counts each lock's
// votes as Extend does (docs/design.md, the keeper).

// batchCallAllowance is the time a batch is given per call on top of the
// node timeout.
const batchCallAllowance = 20 * time.Microsecond

// fallbackWorkers is how many calls run at once on a node that is not a
// Batcher.
const fallbackWorkers = 8

// testHookKeeperAdd, set by tests only, runs as keeper.add starts.
var testHookKeeperAdd func()

// keeper holds a Locker's kept-alive locks and runs their renewals.
type keeper struct {
	keeperDeps

	mu      sync.Mutex
	locks   map[*Lock]*keptLock
	running bool
	exited  chan struct{} // closed when the running goroutine ends
	wake    chan struct{} // a lock was added or dropped
	// kept is closed when a lock is added while waitIdle waits: the
	// goroutine then stays, for that lock. nil when no one waits.
	kept chan struct{}

	ticks    atomic.Uint64 // renewal batches sent
	renewals atomic.Uint64 // lock extensions sent in them
}

// keptLock is the keeper's record of one lock.
type keptLock struct {
	due       time.Time // when the next extension starts
	failures  int       // extensions failed in a row
	postponed bool      // its Extend or Release was running: not before due
}

// keeperDeps is what the keeper uses of its Locker, given by New.
type keeperDeps struct {
	clock       driver.Clock
	ttl         time.Duration          // the locks' TTL
	drift       time.Duration          // set aside for clock drift over the TTL
	keepAlive   time.Duration          // the keep-alive interval
	retry       strategies.RetryPolicy // the delay after failed extensions in a row
	nodeTimeout time.Duration
	maxHold     time.Duration // no extension starts after it; 0: no limit
	closed      func() bool   // the Locker is closed
	// extend runs the extend script for every lock on every node, within
	// timeout, and returns each lock's results in node order.
	extend func(ctx context.Context, locks []*Lock, timeout time.Duration) [][]NodeResult
}

func newKeeper(d keeperDeps) *keeper {
	return &keeper{keeperDeps: d, locks: make(map[*Lock]*keptLock), wake: make(chan struct{}, 1)}
}

// KeepAlive extends the lock automatically until it is released or lost
// or the Locker is closed: one keep-alive interval (WithKeepAlive; TTL/3
// by default) after the start of the round that last set the validity,
// counted as Extend counts it. When too many nodes fail, it retries (after
// TTL/20 to TTL/10) until the lock is at risk: less than the at-risk margin
// (WithAtRiskMargin, TTL/5 by default) of validity left after a failed
// extension. The lock then ends, with a cause matching ErrLockAtRisk and
// ErrLockLost, the margin before its validity does, so that its holder can
// stop in time; when an extension finds the lock gone, it is lost at once.
// Done is closed and Err says why. No extension starts after WithMaxHold:
// the lock then ends at risk too, with a cause matching ErrMaxHold.
//
// KeepAlive returns ErrNotHeld for a released lock, the lock's Err for a
// lost one, ErrClosed after the Locker's Close, and ErrInvalidArgument when
// the TTL leaves no room for a keep-alive interval. Calling it again is a
// no-op.
func (k *Lock) KeepAlive() error {
	if k == nil || k.locker == nil {
		return fmt.Errorf("quorumlock: keep-alive of a nil lock: %w", ErrNotHeld)
	}
	l := k.locker
	if l.o.keepAliveErr != nil {
		return l.o.keepAliveErr
	}
	err := k.Err() // notes an expiry that no timer has seen yet
	if err == nil && l.keeper.add(k) {
		return nil
	}
	if err == nil {
		err = k.Err()
	}
	switch {
	case err == nil || errors.Is(err, ErrReleased) && l.isClosed():
		return l.closedError(OpExtend, k.key)
	case errors.Is(err, ErrReleased):
		return fmt.Errorf("quorumlock: keep-alive of %q: already released: %w", k.key, ErrNotHeld)
	default:
		return err
	}
}

// add starts keeping k alive unless the Locker is closed or k is no longer
// held, and reports whether k is kept (or was stopped at the maximum hold
// time). k's state is read under p.mu, so no lock is added after its end.
func (p *keeper) add(k *Lock) bool {
	if testHookKeeperAdd != nil {
		testHookKeeperAdd()
	}
	if p.closed() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.locks[k] != nil {
		return true
	}
	k.mu.Lock()
	held, capped := k.state == stateHeld, k.capped
	if held && !capped {
		k.startTimerLocked()
		k.kept = true
	}
	// One interval after the start of the round that set the validity.
	due := k.deadline.Add(-(p.ttl - p.drift)).Add(p.keepAlive)
	k.mu.Unlock()
	if !held || capped {
		return held
	}
	p.locks[k] = &keptLock{due: due}
	if p.kept != nil {
		close(p.kept)
		p.kept = nil
	}
	if !p.running {
		p.running = true
		p.exited = make(chan struct{})
		go p.run(p.exited)
		return true
	}
	p.signal()
	return true
}

// drop stops keeping k alive.
func (p *keeper) drop(k *Lock) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.locks[k]; ok {
		delete(p.locks, k)
		p.signal()
	}
}

// signal wakes the goroutine; p.mu is held.
func (p *keeper) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// waitIdle returns once the goroutine has ended, if no lock is kept alive,
// or once a lock is added meanwhile (the goroutine stays for it). It must
// not be called from the keeper's own goroutine.
func (p *keeper) waitIdle() {
	p.mu.Lock()
	if len(p.locks) > 0 || !p.running {
		p.mu.Unlock()
		return
	}
	exited := p.exited
	if p.kept == nil {
		p.kept = make(chan struct{})
	}
	kept := p.kept
	p.signal()
	p.mu.Unlock()
	select {
	case <-exited:
	case <-kept:
	}
}

// count returns how many locks are kept alive.
func (p *keeper) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.locks)
}

// run is the keeper's goroutine: it renews what is due, sleeps until the
// next lock falls due, and ends when no lock is left.
func (p *keeper) run(exited chan struct{}) {
	defer close(exited)
	slack := p.keepAlive / 2
	for {
		p.mu.Lock()
		if len(p.locks) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		now := p.clock.Now()
		horizon := now.Add(slack)
		var batch []*Lock
		var next time.Time
		for k, e := range p.locks {
			switch {
			// Due, or due soon and neither retrying nor postponed (docs/design.md).
			case !e.due.After(now) || (e.failures == 0 && !e.postponed && !e.due.After(horizon)):
				batch = append(batch, k)
			case next.IsZero() || e.due.Before(next):
				next = e.due
			}
		}
		p.mu.Unlock()

		if len(batch) > 0 {
			p.renew(batch)
			continue
		}
		timer := p.clock.NewTimer(next.Sub(now))
		select {
		case <-timer.C():
		case <-p.wake:
			timer.Stop()
		}
	}
}

// renew extends the due locks of one tick together. It holds each lock's
// op mutex from its check to its settling, so that the lock's Extend and
// Release wait for the renewal; a lock whose Extend or Release runs is
// postponed by a node timeout, not waited for. Ended and capped locks are
// dropped.
func (p *keeper) renew(batch []*Lock) {
	now := p.clock.Now()
	var locks []*Lock
	var deadlines []time.Time
	for _, k := range batch {
		if !k.op.TryLock() { // its Extend or Release runs
			p.postpone(k, now.Add(p.nodeTimeout))
			continue
		}
		deadline, ok := p.check(k, now)
		if !ok {
			p.drop(k)
			k.op.Unlock()
			continue
		}
		locks = append(locks, k)
		deadlines = append(deadlines, deadline)
	}
	if len(locks) == 0 {
		return
	}
	start, end, results := p.extendAll(locks)
	for i, k := range locks {
		qe := k.settleExtend(context.Background(), start, end, deadlines[i], results[i])
		p.reschedule(k, qe, start, end)
		if qe != nil && errors.Is(qe.Reason, ErrUnavailable) {
			k.extensionFailed(qe)
		}
		k.op.Unlock()
	}
}

// check reports whether k, whose op mutex is held, is to be extended at
// now, with its deadline: not once it ended or reached the maximum hold
// time (then it ends at risk, the at-risk margin before its validity).
func (p *keeper) check(k *Lock, now time.Time) (deadline time.Time, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	held := k.state == stateHeld
	capped := held && p.maxHold > 0 && !now.Before(k.taken.Add(p.maxHold))
	if capped {
		k.capped = true
		k.moveTimerLocked()
	}
	return k.deadline, held && !capped
}

// extendAll extends locks on every node, within the node timeout plus
// batchCallAllowance per lock, and returns when the round started and
// ended and each lock's results.
func (p *keeper) extendAll(locks []*Lock) (start, end time.Time, results [][]NodeResult) {
	p.ticks.Add(1)
	p.renewals.Add(uint64(len(locks)))
	timeout := p.nodeTimeout + time.Duration(len(locks))*batchCallAllowance
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start = p.clock.Now()
	results = p.extend(ctx, locks, timeout)
	return start, p.clock.Now(), results
}

// reschedule sets when k is extended next, after the round from start to
// end whose error is qe.
func (p *keeper) reschedule(k *Lock, qe *QuorumError, start, end time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.locks[k]
	if e == nil {
		return
	}
	e.postponed = false
	if qe == nil {
		e.due, e.failures = start.Add(p.keepAlive), 0
	} else {
		e.failures++
		e.due = end.Add(max(p.retry(e.failures), MinRetryDelay))
	}
}

func (p *keeper) postpone(k *Lock, due time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.locks[k]; e != nil {
		e.due, e.postponed = due, true
	}
}

// extendAll runs the extend script for every lock on every node, the
// nodes in parallel, and returns each lock's results in node order.
func (l *Locker) extendAll(ctx context.Context, locks []*Lock, timeout time.Duration) [][]NodeResult {
	n := len(l.nodes)
	flat := make([]NodeResult, len(locks)*n)
	out := make([][]NodeResult, len(locks))
	for i := range out {
		out[i] = flat[i*n : (i+1)*n : (i+1)*n]
	}
	var wg sync.WaitGroup
	for j := range l.nodes {
		if l.suspect.is(j) { // not asked (ErrNodeSuspect)
			for i := range out {
				out[i][j] = NodeResult{Index: j, Node: l.names[j], Outcome: OutcomeFailed, Err: l.health.skipped(j)}
			}
			continue
		}
		wg.Go(func() {
			start := l.o.clock.Now()
			answers := make([]answer, len(locks))
			if err := l.precheck(ctx, j); err != nil {
				for i := range answers {
					answers[i].err = err
				}
			} else {
				if b, ok := l.nodes[j].(driver.Batcher); ok {
					l.extendBatched(ctx, j, b, locks, answers)
				} else {
					l.extendEach(ctx, j, locks, answers)
				}
				l.confirmAll(ctx, j, answers)
			}
			latency := l.o.clock.Now().Sub(start)
			for i, v := range answers {
				r := &out[i][j]
				*r = NodeResult{Index: j, Node: l.names[j], Latency: latency}
				// Never cut: the batch's only deadline is its own.
				r.Outcome, r.Err = l.outcome(j, v.ok, v.err, false, ctx.Err() != nil, timeout)
			}
		})
	}
	wg.Wait()
	return out
}

// answer is one node's answer to one call: its vote (ok) or an error.
type answer struct {
	ok  bool
	err error
}

// extendBatched sends the extensions to node i in one batch.
func (l *Locker) extendBatched(ctx context.Context, i int, b driver.Batcher, locks []*Lock, answers []answer) {
	reqs := make([]request, len(locks))
	for j, k := range locks {
		reqs[j] = k.kind.extend(k.value)
	}
	calls := l.sendBatch(ctx, i, b, reqs)
	for j := range calls {
		if calls[j].Err == nil {
			answers[j].ok, answers[j].err = voteOf(reqs[j].script, calls[j].Reply)
		} else {
			answers[j].err = calls[j].Err
		}
	}
}

// extendEach sends the extensions to node i one by one, a few at a time.
func (l *Locker) extendEach(ctx context.Context, i int, locks []*Lock, answers []answer) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(fallbackWorkers, len(locks)) {
		wg.Go(func() {
			for j := range next {
				k := locks[j]
				r := k.kind.extend(k.value)
				answers[j].ok, answers[j].err = l.requestVote(ctx, i, &r)
			}
		})
	}
	for j := range locks {
		next <- j
	}
	close(next)
	wg.Wait()
}
