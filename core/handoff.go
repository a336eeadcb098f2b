package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is the fast hand-off (docs/handoff.md): release notices from
// the herald, the key's wait queue there, and yielding a key just handed
// over. Why it works as it does: docs/design.md, the hand-off inside.

// watchLinger is how long a key's subscription outlives its last waiter.
const watchLinger = time.Second

// minSubscribeTimeout is the least time a subscription may take: it runs
// beside the waiter's polling, so it can be generous.
const minSubscribeTimeout = time.Second

// hub holds a Locker's release-notice subscriptions, by channel.
type hub struct {
	hubDeps
	unsupported atomic.Bool // the herald's Watch said errors.ErrUnsupported
	owner       string      // this Locker's tickets are owner.seq
	prefix      string      // owner and the dot
	seq         atomic.Uint64

	mu      sync.Mutex
	subs    map[subKey]*watch
	tickets map[string]*listener // this Locker's tickets in wait queues
	closed  bool
	pending sync.WaitGroup // subscriptions being made, and lingering ones
}

// subKey names a subscription: a channel on a node.
type subKey struct {
	node    int
	channel string
}

// watch is the subscription of one channel on one node, the herald when
// it was made.
type watch struct {
	subKey

	// guarded by hub.mu
	refs      int
	listeners []*listener // waiting for a notice, longest waiting first
	busy      *listener   // woken, its round not yet over
	missed    bool        // a notice came while busy's round ran
	stops     []func()
	active    bool         // the herald confirmed the subscription
	ended     bool         // stopped: a subscription made later is stopped at once
	linger    driver.Timer // runs while refs is 0
	fails     int          // failed subscriptions in a row
	retry     driver.Timer // runs until the subscription is made again
}

// hubDeps is what the hub uses of its Locker, given by New.
type hubDeps struct {
	nodes       []Node // a subscription is made on a driver.Watcher
	clock       driver.Clock
	nodeTimeout time.Duration
	herald      func() int // the node whose notices wake waiters now
}

func newHub(d hubDeps) *hub {
	owner := newValue()[:8] // base64url: no dot
	return &hub{hubDeps: d, owner: owner, prefix: owner + ".", subs: make(map[subKey]*watch), tickets: make(map[string]*listener)}
}

// join returns the subscription to rkey's release notices on the herald
// node, with me among its listeners; the caller must leave it. A new one is made
// in the background.
func (h *hub) join(rkey string, herald int, me *listener) *watch {
	sk := subKey{node: herald, channel: driver.WaiterChannel(rkey, h.owner)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.subs[sk]; w != nil {
		w.refs++
		if w.linger != nil && w.linger.Stop() {
			h.pending.Done()
		}
		w.linger = nil
		h.listenLocked(w, me)
		return w
	}
	w := &watch{subKey: sk, refs: 1}
	h.listenLocked(w, me)
	if h.closed {
		w.ended = true
		return w
	}
	h.subs[sk] = w
	if wn, ok := h.nodes[herald].(driver.Watcher); ok && !h.unsupported.Load() {
		h.pending.Add(1)
		go h.subscribe(w, wn, max(h.nodeTimeout, minSubscribeTimeout))
	}
	return w
}

// subscribe makes w's subscription on its node; after a failure, again
// later (see retryLaterLocked), unless the node cannot subscribe at all.
func (h *hub) subscribe(w *watch, wn driver.Watcher, timeout time.Duration) {
	defer h.pending.Done()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	stop, err := wn.Watch(ctx, w.channel, func(message string) { h.message(w, message) })
	cancel()
	if errors.Is(err, errors.ErrUnsupported) {
		h.unsupported.Store(true)
		return
	}
	h.mu.Lock()
	if err != nil {
		h.retryLaterLocked(w, wn, timeout)
		h.mu.Unlock()
		return
	}
	if w.ended {
		h.mu.Unlock()
		stop()
		return
	}
	w.stops = append(w.stops, stop)
	w.active, w.fails = true, 0
	// No waiter so far could queue a ticket: wake them all to queue now.
	h.requeueLocked(w, false)
	h.mu.Unlock()
}

// requeueLocked wakes every listener of w to queue its ticket now,
// without a round first (see handoffWaiter.wait); moved says that the
// herald has moved. h.mu is held.
func (h *hub) requeueLocked(w *watch, moved bool) {
	for _, me := range w.listeners {
		me.listening, me.activated, me.moved = false, true, moved
		select {
		case me.woken <- struct{}{}:
		default:
		}
	}
	clear(w.listeners)
	w.listeners = w.listeners[:0]
}

// heraldMoved is called when a node turns suspect or answers again: it
// wakes the waiters of every subscription on a node that is no longer the
// herald, so that they queue on the new one now. The releases hand the key
// over there, and their tickets on the old one would wait for their retry
// delay. Woken together, those that find the lock free make leader rounds,
// so as not to split the votes (docs/design.md, the herald's failover).
func (h *hub) heraldMoved() {
	herald := h.herald()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.subs {
		if w.node != herald {
			h.requeueLocked(w, true)
		}
	}
}

// retryLaterLocked makes w's subscription again after a pause, paced as a
// driver's resubscription (driver.MinBackoff, doubling with each failure
// in a row up to driver.MaxBackoff), unless w ends first: its waiters poll
// meanwhile, and those that come later find it confirmed. h.mu is held.
func (h *hub) retryLaterLocked(w *watch, wn driver.Watcher, timeout time.Duration) {
	if w.ended {
		return
	}
	pause := min(driver.MinBackoff<<min(w.fails, 16), driver.MaxBackoff)
	w.fails++
	h.pending.Add(1)
	w.retry = h.clock.AfterFunc(pause, func() {
		h.mu.Lock()
		w.retry = nil
		ended := w.ended
		h.mu.Unlock()
		if ended {
			h.pending.Done()
			return
		}
		h.subscribe(w, wn, timeout)
	})
}

// message handles a notice: a ticket of this Locker wakes its waiter; an
// empty message, or a ticket whose waiter has gone, the longest waiting one.
func (h *hub) message(w *watch, message string) {
	if message != "" && !strings.HasPrefix(message, h.prefix) {
		return // another Locker's waiter: that Locker wakes it
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if me := h.tickets[message]; me != nil {
		delete(h.tickets, message)
		me.ticket, me.named = "", true
		select {
		case me.woken <- struct{}{}:
		default:
		}
		return
	}
	h.notifyLocked(w)
}

// listener is one Acquire call waiting on a watch.
type listener struct {
	woken chan struct{} // receives a token when a notice picks it

	// guarded by hub.mu
	listening bool   // in the watch's listeners, for empty notices
	ticket    string // its ticket in the key's wait queue, if any
	named     bool   // woken by its ticket: the lock was handed to it
	activated bool   // woken because the subscription was confirmed
	moved     bool   // or because the herald moved (with activated)
}

// confirmed reports whether w's subscription is confirmed and not ended.
func (h *hub) confirmed(w *watch) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.active && !w.ended
}

// hasTicket reports whether me waits in the key's wait queue.
func (h *hub) hasTicket(me *listener) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return me.ticket != ""
}

// newTicket gives me a ticket for the key's wait queue, registered before
// it is queued; ok is false when w is not confirmed or me has one.
func (h *hub) newTicket(w *watch, me *listener, shares bool) (ticket string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !w.active || w.ended || me.ticket != "" {
		return "", false
	}
	seq := strconv.FormatUint(h.seq.Add(1), 36) // lower case: never "R"
	if shares {
		seq = "R" + seq // a shared waiter's (driver.ReaderTicket)
	}
	me.ticket = h.prefix + seq
	h.tickets[me.ticket] = me
	return me.ticket, true
}

// dropTicket forgets me's ticket and returns it, or "" if it has none.
func (h *hub) dropTicket(me *listener) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := me.ticket
	if t != "" {
		delete(h.tickets, t)
		me.ticket = ""
	}
	return t
}

// takeWake reports what woke me since the last call: its ticket, the
// subscription's confirmation, or the herald's move (with activated);
// none of them for an empty notice.
func (h *hub) takeWake(me *listener) (named, activated, moved bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	named, activated, moved = me.named, me.activated, me.moved
	me.named, me.activated, me.moved = false, false, false
	return named, activated, moved
}

func newListener() *listener { return &listener{woken: make(chan struct{}, 1)} }

// listen puts me among w's listeners, if not there already: a notice
// may wake it.
func (h *hub) listen(w *watch, me *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listenLocked(w, me)
}

func (h *hub) listenLocked(w *watch, me *listener) {
	if !me.listening {
		me.listening = true
		w.listeners = append(w.listeners, me)
	}
}

// roundOver is called after each of me's rounds: notices held back while
// it ran are passed on to one waiter unless me won.
func (h *hub) roundOver(w *watch, me *listener, won bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.busy != me {
		return
	}
	w.busy = nil
	missed := w.missed
	w.missed = false
	if missed && !won {
		h.listenLocked(w, me)
		h.notifyLocked(w)
	}
}

// notifyLocked wakes the longest waiting waiter, or holds the notice back
// while a woken one's round runs (see roundOver). h.mu is held.
func (h *hub) notifyLocked(w *watch) {
	if w.busy != nil {
		w.missed = true
		return
	}
	if len(w.listeners) == 0 {
		return
	}
	me := w.listeners[0]
	w.listeners[0] = nil
	w.listeners = w.listeners[1:]
	me.listening = false
	w.busy = me
	select {
	case me.woken <- struct{}{}:
	default:
	}
}

// forget takes me out of w's listeners, when its Acquire returns.
func (h *hub) forget(w *watch, me *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.busy == me {
		w.busy = nil
	}
	if me.listening {
		for i, x := range w.listeners {
			if x == me {
				w.listeners = append(w.listeners[:i], w.listeners[i+1:]...)
				break
			}
		}
		me.listening = false
	}
}

// leave gives up a subscription; the last to leave lets it linger, then ends it.
func (h *hub) leave(w *watch, me *listener) {
	h.forget(w, me)
	h.mu.Lock()
	defer h.mu.Unlock()
	w.refs--
	if w.refs > 0 {
		return
	}
	if h.closed || h.subs[w.subKey] != w {
		// Close has passed, or the Locker was closing when w was made.
		h.endLocked(w)
		return
	}
	h.pending.Add(1)
	w.linger = h.clock.AfterFunc(watchLinger, func() {
		defer h.pending.Done()
		h.mu.Lock()
		defer h.mu.Unlock()
		if w.refs > 0 || w.ended {
			return
		}
		w.linger = nil
		h.endLocked(w)
	})
}

// endLocked ends w's subscriptions, in the background; h.mu is held.
func (h *hub) endLocked(w *watch) {
	if h.subs[w.subKey] == w {
		delete(h.subs, w.subKey)
	}
	w.ended = true
	if w.retry != nil && w.retry.Stop() {
		h.pending.Done()
	}
	w.retry = nil
	stops := w.stops
	w.stops = nil
	if len(stops) > 0 {
		h.pending.Add(1)
		go func() {
			defer h.pending.Done()
			runAll(stops)
		}()
	}
}

// close ends every subscription and waits for the hub's goroutines; no
// waiter may be left.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for _, w := range h.subs {
		if w.linger != nil && w.linger.Stop() {
			h.pending.Done()
		}
		w.linger = nil
		h.endLocked(w)
	}
	h.mu.Unlock()
	h.pending.Wait()
}

// count returns how many keys have a subscription.
func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func runAll(fns []func()) {
	for _, f := range fns {
		f()
	}
}

// handoffWaiter is the waiter of a key with hand-off (WithWakeOnRelease):
// after a round lost to a holder it queues a ticket in the key's wait
// queue on the herald, and wakes at a release notice as well as at the
// retry delay (docs/design.md, the hand-off inside).
type handoffWaiter struct {
	l          *Locker
	ctx        context.Context
	rkey, qkey string
	shares     bool // its lock kind shares the key: its ticket says so
	// holds are the keys that all hold the lock while it is taken (see
	// holdKeys): the enqueue finds it free when one is missing.
	holds []string
	// A multi-key lock's waiter (setQueues) queues on a key of its set
	// that is held: keys and queues are its candidates, and at the index
	// of the one it follows now (rkey, qkey), which it prefers next time.
	keys, queues []string
	enqueueKeys  []string // keys, then queues: ScriptEnqueueAll's
	at           int

	w  *watch    // the key's release notices, once queued
	me *listener // this acquisition among w's listeners
	// force queues even if the lock is free: just handed to a waiter here,
	// or by the last round's clean-up.
	force bool
	// woken is what woke the next round; chain, the wake of the round a
	// follow-up follows, which it inherits. followUp: the next round uses
	// up no try.
	woken, chain wakeKind
	followUp     bool
	frees        int // rounds in a row after which the queue found the lock free
}

// newHandoffWaiter returns the waiter of the lock k, which has a wait
// queue; with force, it queues even if the lock is free.
func (l *Locker) newHandoffWaiter(ctx context.Context, k lockKind, force bool) *handoffWaiter {
	h := &handoffWaiter{l: l, ctx: ctx, rkey: k.stored(), qkey: k.queue(), holds: holdKeys(k), force: force, shares: k.shares()}
	if s, ok := k.(setQueues); ok {
		h.keys, h.queues = s.candidates()
		h.enqueueKeys = slices.Concat(h.keys, h.queues)
	}
	return h
}

// setQueues is a lock kind whose waiter may queue on any of several keys
// (keySet): it names them and their wait queues, in the same order.
type setQueues interface {
	candidates() (rkeys, queues []string)
}

// holdKeys returns the keys that all hold k while it is taken: a
// semaphore's slots (it is free when one is missing), else its stored key.
func holdKeys(k lockKind) []string {
	s, ok := k.(*semaphore)
	if !ok {
		return []string{k.stored()}
	}
	keys := make([]string, len(s.slots))
	for i, p := range s.slots {
		keys[i] = p.rkey
	}
	return keys
}

func (h *handoffWaiter) startRound() (wakeKind, bool) {
	if h.w != nil {
		h.l.hub.listen(h.w, h.me) // before the round: a release during it counts
	}
	followUp := h.followUp
	h.followUp = false
	return h.woken, followUp
}

func (h *handoffWaiter) endRound(qe *QuorumError, handed bool) {
	h.chain, h.woken = h.woken, wokenByNothing
	if h.w != nil {
		h.l.hub.roundOver(h.w, h.me, qe == nil)
	}
	h.force = handed // queue behind the waiter its clean-up woke
}

func (h *handoffWaiter) wait(last *QuorumError, delay time.Duration) (round, closed bool) {
	if h.joinQueue(last) {
		return true, false // released before the waiter could queue: try again now
	}
	if h.frees > 1 && h.chain != wokenByNothing {
		// Free again after a notice: its release may still be reaching the
		// other nodes (docs/design.md, short pauses after a notice).
		if pause := MinRetryDelay << min(h.frees-2, 30); pause < h.l.o.nodeTimeout && pause < delay {
			delay, h.followUp = pause, true
		}
	}
	var released <-chan struct{}
	if h.w != nil {
		h.l.hub.listen(h.w, h.me)
		released = h.me.woken
	}
	woke, closed := sleep(h.ctx, h.l.o.clock, h.l.closing, delay, released)
	if !woke {
		if h.followUp {
			h.woken = h.chain
		}
		return true, closed
	}
	h.followUp = false // a new wake
	named, activated, moved := h.l.hub.takeWake(h.me)
	switch {
	case named:
		h.woken = wokenByTicket
	case moved: // queue on the new herald now; if free, a leader round
		h.chain = wokenByNotice
		return false, false
	case activated: // queue now; a round only if the lock is free
		return false, false
	default:
		h.woken = wokenByNotice
	}
	return true, false
}

// joinQueue puts the waiter in the key's wait queue after a round lost to
// a holder (or with force, or when the herald moved before any round, see
// heraldMoved), joining the key's notices first. It reports true when the
// queue first found the lock free: try again at once.
func (h *handoffWaiter) joinQueue(last *QuorumError) (again bool) {
	if !h.force && last != nil && !errors.Is(last.Reason, ErrNotAcquired) {
		h.frees = 0 // not lost to a holder: no short pauses
		return false
	}
	herald := h.l.heraldNow()
	if h.w != nil && h.w.node != herald { // the herald failed over, or back
		h.leave()
		h.w, h.me = nil, nil
	}
	if h.w == nil {
		h.me = newListener()
		h.w = h.l.hub.join(h.rkey, herald, h.me)
	}
	var queued, free bool
	if h.keys == nil {
		queued, free = h.l.enqueue(h.ctx, h.w, h.me, h.holds, h.qkey, h.force, h.shares)
	} else {
		var handed bool
		if queued, free, handed = h.enqueueSet(); handed {
			h.woken, h.frees = wokenByTicket, 0
			return true
		}
	}
	if queued {
		h.force = false
	}
	if !free {
		h.frees = 0
		return false
	}
	if h.frees++; h.frees == 1 {
		h.followUp, h.woken = true, h.chain
		return true
	}
	return false
}

// enqueueSet is enqueue for a multi-key lock: its ticket goes to the
// queue of a key of the set that is held, the one it follows if that one
// still is (ScriptEnqueueAll), and the waiter follows that key from then
// on. It reports handed when its ticket was popped before the waiter
// could hear it: the key was handed to it.
func (h *handoffWaiter) enqueueSet() (queued, free, handed bool) {
	ticket, ok := h.l.hub.newTicket(h.w, h.me, false)
	if !ok {
		return h.l.hub.hasTicket(h.me), false, false
	}
	mode := ""
	if h.force {
		mode = "force"
	}
	r := newRequest(driver.ScriptEnqueueAll, h.enqueueKeys, ticket, h.l.queueTTL, mode, strconv.Itoa(h.at+1))
	at, err := h.l.enqueueAt(h.ctx, h.w.node, &r, len(h.keys))
	if err != nil || at == 0 {
		h.l.hub.dropTicket(h.me)
		return false, err == nil, false
	}
	return true, false, h.follow(int(at) - 1)
}

// follow moves the waiter's watch to key at, where its ticket is queued
// now: notices are found by ticket whatever channel brings them, but only
// a confirmed subscription to the key's channel brings them. Until the
// new subscription is confirmed, the waiter takes its ticket back (the
// confirmation wakes it to queue again); a ticket already popped was a
// hand-off to it (handed). A notice lost in the move (a subscription
// confirmed between the enqueue and the check) costs the waiter its
// retry delays, since it polls, never safety.
func (h *handoffWaiter) follow(at int) (handed bool) {
	if at == h.at {
		return false
	}
	node := h.w.node
	h.l.hub.leave(h.w, h.me)
	h.at, h.rkey, h.qkey = at, h.keys[at], h.queues[at]
	h.w = h.l.hub.join(h.rkey, node, h.me)
	if h.l.hub.confirmed(h.w) {
		return false
	}
	ticket := h.l.hub.dropTicket(h.me)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), h.l.o.nodeTimeout)
	defer cancel()
	dequeue := newRequest(driver.ScriptDequeue, []string{h.qkey}, ticket)
	removed, err := h.l.requestAnswerOnce(cctx, node, &dequeue)
	return err == nil && removed == 0
}

// enqueueAt makes r, a ScriptEnqueueAll of a set of n keys, on the herald
// node, once (not idempotent), and returns the index it answers.
func (l *Locker) enqueueAt(ctx context.Context, node int, r *request, n int) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, l.o.nodeTimeout)
	defer cancel()
	reply, err := l.send(cctx, node, r)
	if ctx.Err() == nil && l.health.lost(cctx, node, err) {
		l.health.failed(node, err)
	}
	if err != nil {
		return 0, err
	}
	at, ok := reply.(int64)
	if !ok || at < 0 || at > int64(n) {
		return 0, fmt.Errorf("quorumlock: unexpected reply %#v to the %s script", reply, r.script.Name())
	}
	return at, nil
}

// leave takes the waiter out of the queue and the notices.
func (h *handoffWaiter) leave() {
	if h.w != nil {
		h.l.dequeue(h.ctx, h.w.node, h.me, h.qkey)
		h.l.hub.leave(h.w, h.me)
	}
}

// queueTTLFactor is how many TTLs a wait queue outlives its last addition.
const queueTTLFactor = 4

// enqueue puts me's ticket in the wait queue qkey on w's node; with
// force, even if the lock is free (one of holds, its keys, missing). It
// reports queued, or free when the lock was free and nothing was queued;
// neither when w is not confirmed, the herald failed, or me is already
// queued.
func (l *Locker) enqueue(ctx context.Context, w *watch, me *listener, holds []string, qkey string, force, shares bool) (queued, free bool) {
	ticket, ok := l.hub.newTicket(w, me, shares)
	if !ok {
		return l.hub.hasTicket(me), false
	}
	mode := ""
	if force {
		mode = "force"
	}
	cctx, cancel := context.WithTimeout(ctx, l.o.nodeTimeout)
	// Once only: not idempotent, a ticket queued twice is popped twice.
	enqueue := newRequest(driver.ScriptEnqueue, append([]string{holds[0], qkey}, holds[1:]...), ticket, l.queueTTL, mode)
	a, err := l.requestAnswerOnce(cctx, w.node, &enqueue)
	if ctx.Err() == nil && l.health.lost(cctx, w.node, err) {
		l.health.failed(w.node, err)
	}
	cancel()
	if err != nil || a == 0 {
		// A failed call may have queued it; its notice then wakes another waiter.
		l.hub.dropTicket(me)
	}
	return err == nil && a == 1, err == nil && a == 0
}

// dequeue takes me's ticket out of the wait queue on node herald, if it is
// still there; a suspect herald is not asked (a ticket left behind wakes
// another waiter, or expires with the queue).
func (l *Locker) dequeue(ctx context.Context, herald int, me *listener, qkey string) {
	ticket := l.hub.dropTicket(me)
	if ticket == "" || l.suspect.is(herald) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.o.nodeTimeout)
	dequeue := newRequest(driver.ScriptDequeue, []string{qkey}, ticket)
	_, _ = l.requestAnswerOnce(cctx, herald, &dequeue)
	cancel()
}

// heraldNow returns the herald: the first node by name that is not
// suspect, so that every Locker that sees the same nodes suspect picks
// the same one (docs/design.md, the herald's failover).
func (l *Locker) heraldNow() int {
	for _, i := range l.order {
		if !l.suspect.is(i) {
			return i
		}
	}
	return l.herald
}
