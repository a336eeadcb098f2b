package core

import (
	"context"
	"errors"
	"github.com/quorumlock/quorumlock/core/driver"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file is the fast hand-off. A waiter in Acquire that lost a round to
// another holder subscribes to its Locker's channel for the key
// (WaiterChannel) on the herald node (the Locker's first node by name, the
// same for every Locker over those servers), and queues a ticket in the
// key's wait queue there (ScriptEnqueue). The holder's release pops the
// oldest ticket and publishes it on the channel of the ticket's Locker:
// only that Locker hears it, only that waiter wakes, and it takes the lock
// with an ordinary round, which no one else is running. Waiters are thus
// served first come, first served across all Lockers, and a release wakes
// one waiter, not a herd: a herd of waiters starting rounds together splits
// the nodes' votes so that often none wins (measured: 32 goroutines of one
// Locker on 3 nodes took ten times longer with every waiter woken).
//
// An empty notice (the subscription was confirmed or made again, and a
// release may have been missed; or a ticket of this Locker whose waiter
// has gone) wakes the Locker's longest waiting waiter; such woken rounds
// ask the nodes one by one (leaderRound) so that they do not split the
// votes. Notices that arrive while the woken waiter's round runs are held
// back until that round is over, and passed on to one waiter only if it
// lost. Every waiter keeps its retry delay as a fallback: for locks that
// expire instead of being released, for a herald that is down, and for
// tickets whose waiter vanished.
//
// One subscription per key and Locker serves all of the Locker's waiters on
// that key; it lingers a moment after the last waiter leaves, so that a
// key contended again and again is not subscribed to again and again.

// watchLinger is how long a key's subscription outlives its last waiter.
const watchLinger = time.Second

// minSubscribeTimeout is the least time a subscription may take. It runs
// beside the waiter's polling, not in its way, so it can be generous: a
// fresh connection on a loaded machine can take longer than a node call.
const minSubscribeTimeout = time.Second

// hub holds a Locker's release-notice subscriptions, by channel.
type hub struct {
	l           *Locker
	unsupported atomic.Bool // the herald's Watch said errors.ErrUnsupported
	owner       string      // this Locker's tickets are owner.seq
	prefix      string      // owner and the dot
	seq         atomic.Uint64

	mu      sync.Mutex
	subs    map[string]*watch
	tickets map[string]*waiter // this Locker's tickets in wait queues
	closed  bool
	pending sync.WaitGroup // subscriptions being made, and lingering ones
}

// watch is the subscription of one channel on the herald.
type watch struct {
	channel string

	// guarded by hub.mu
	refs   int
	queue  []*waiter // waiting for a notice, longest waiting first
	busy   *waiter   // woken, its round not yet over
	missed bool      // a notice came while busy's round ran
	stops  []func()
	active bool         // the herald confirmed the subscription
	ended  bool         // stopped: a subscription made later is stopped at once
	linger driver.Timer // runs while refs is 0
}

func newHub(l *Locker) *hub {
	owner := newValue()[:8] // base64url: no dot
	return &hub{l: l, owner: owner, prefix: owner + ".", subs: make(map[string]*watch), tickets: make(map[string]*waiter)}
}

// join returns the subscription to the release notices of rkey, with me
// queued on it; the caller must leave it. A new subscription is made in
// the background, so the waiter keeps polling meanwhile; once the first
// node confirms it, the longest waiting waiter is woken, since the holder
// may have released before.
func (h *hub) join(rkey string, me *waiter) *watch {
	channel := driver.WaiterChannel(rkey, h.owner)
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.subs[channel]; w != nil {
		w.refs++
		if w.linger != nil && w.linger.Stop() {
			h.pending.Done()
		}
		w.linger = nil
		h.armLocked(w, me)
		return w
	}
	w := &watch{channel: channel, refs: 1}
	h.armLocked(w, me)
	if h.closed {
		w.ended = true
		return w
	}
	h.subs[channel] = w
	if wn, ok := h.l.nodes[h.l.herald].(driver.Watcher); ok && !h.unsupported.Load() {
		h.pending.Add(1)
		go h.subscribe(w, wn, max(h.l.o.nodeTimeout, minSubscribeTimeout))
	}
	return w
}

// subscribe makes w's subscription on the herald.
func (h *hub) subscribe(w *watch, wn driver.Watcher, timeout time.Duration) {
	defer h.pending.Done()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	stop, err := wn.Watch(ctx, w.channel, func(message string) { h.message(w, message) })
	cancel()
	if err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			h.unsupported.Store(true)
		}
		return
	}
	h.mu.Lock()
	if w.ended {
		h.mu.Unlock()
		stop()
		return
	}
	w.stops = append(w.stops, stop)
	w.active = true
	// Every waiter so far could not queue a ticket (it would not have been
	// heard): wake them all, to queue one after one more round. Woken one
	// at a time instead, the others would sleep out their retry delay.
	for _, me := range w.queue {
		me.queued, me.activated = false, true
		select {
		case me.woken <- struct{}{}:
		default:
		}
	}
	clear(w.queue)
	w.queue = w.queue[:0]
	h.mu.Unlock()
}

// message handles a notice: a ticket wakes its waiter, if it is one of
// this Locker's; an empty message, or a ticket of this Locker whose waiter
// has gone (the lock is free and no one else was told), wakes the longest
// waiting waiter.
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

// waiter is one Acquire call waiting on a watch.
type waiter struct {
	woken chan struct{} // receives a token when a notice picks it

	// guarded by hub.mu
	queued    bool   // in the watch's queue, for empty notices
	ticket    string // its ticket in the key's wait queue, if any
	named     bool   // woken by its ticket: the lock was handed to it
	activated bool   // woken because the subscription was confirmed
}

// hasTicket reports whether me waits in the key's wait queue.
func (h *hub) hasTicket(me *waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return me.ticket != ""
}

// newTicket gives me a ticket for the key's wait queue and registers it,
// so that a notice that comes as soon as it is queued finds me; ok is
// false when w's subscription is not confirmed (a queued ticket would not
// be heard) or me already has one.
func (h *hub) newTicket(w *watch, me *waiter) (ticket string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !w.active || w.ended || me.ticket != "" {
		return "", false
	}
	me.ticket = h.prefix + strconv.FormatUint(h.seq.Add(1), 36)
	h.tickets[me.ticket] = me
	return me.ticket, true
}

// dropTicket forgets me's ticket and returns it, or "" if it has none
// (it was never queued, or a notice has used it).
func (h *hub) dropTicket(me *waiter) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := me.ticket
	if t != "" {
		delete(h.tickets, t)
		me.ticket = ""
	}
	return t
}

// takeWake reports what woke me since the last call: its ticket (the
// lock was handed to it, and no one else was woken), or the confirmation of
// the subscription (it can queue now); neither for an empty notice.
func (h *hub) takeWake(me *waiter) (named, activated bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	named, activated = me.named, me.activated
	me.named, me.activated = false, false
	return named, activated
}

func newWaiter() *waiter { return &waiter{woken: make(chan struct{}, 1)} }

// arm puts me in the queue, if not there already: called before each
// round, so that a release during the round counts.
func (h *hub) arm(w *watch, me *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armLocked(w, me)
}

func (h *hub) armLocked(w *watch, me *waiter) {
	if !me.queued {
		me.queued = true
		w.queue = append(w.queue, me)
	}
}

// roundOver is called after each of me's rounds. Notices that came while
// me was the woken waiter in its round were dropped; unless me has won the
// lock (they were then the release it took over), one of them is passed on
// now, since a later release may be among them.
func (h *hub) roundOver(w *watch, me *waiter, won bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.busy != me {
		return
	}
	w.busy = nil
	missed := w.missed
	w.missed = false
	if missed && !won {
		h.armLocked(w, me)
		h.notifyLocked(w)
	}
}

// notifyLocked wakes the longest waiting waiter, unless a woken one is
// still in its round: that one's round may already see the release, and
// if not, roundOver passes the notice on. h.mu is held.
func (h *hub) notifyLocked(w *watch) {
	if w.busy != nil {
		w.missed = true
		return
	}
	if len(w.queue) == 0 {
		return
	}
	me := w.queue[0]
	w.queue[0] = nil
	w.queue = w.queue[1:]
	me.queued = false
	w.busy = me
	select {
	case me.woken <- struct{}{}:
	default:
	}
}

// forget takes me out of w's queue, when its Acquire returns.
func (h *hub) forget(w *watch, me *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.busy == me {
		w.busy = nil
	}
	if me.queued {
		for i, x := range w.queue {
			if x == me {
				w.queue = append(w.queue[:i], w.queue[i+1:]...)
				break
			}
		}
		me.queued = false
	}
}

// leave gives up a subscription; the last to leave lets it linger, and
// then ends it.
func (h *hub) leave(w *watch, me *waiter) {
	h.forget(w, me)
	h.mu.Lock()
	defer h.mu.Unlock()
	w.refs--
	if w.refs > 0 {
		return
	}
	if h.closed || h.subs[w.channel] != w {
		// Close has passed, or the Locker was closing when w was made.
		h.endLocked(w)
		return
	}
	h.pending.Add(1)
	w.linger = h.l.o.clock.AfterFunc(watchLinger, func() {
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
	if h.subs[w.channel] == w {
		delete(h.subs, w.channel)
	}
	w.ended = true
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
// waiter may be left (Close waits for Acquire calls first).
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
