package core

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// This file is the fast hand-off: a waiter in Acquire that lost a round to
// another holder subscribes to the key's release notices (ReleaseChannel)
// on the nodes that are Watchers, and retries as soon as one arrives. One
// subscription per key and Locker serves all of the Locker's waiters on
// that key; it lingers a moment after the last waiter leaves, so that a
// key contended again and again is not subscribed to again and again.
//
// A notice wakes one waiter of the Locker, the longest waiting, not all of
// them: only one can win the lock, and a herd of waiters starting rounds
// together splits the nodes' votes so that often none wins (measured: 32
// goroutines of one Locker on 3 nodes took ten times longer with every
// waiter woken). A release publishes on every node, so notices that arrive
// while the woken waiter's round runs are the same release, and are
// dropped. The others keep their retry delay as a fallback.

// watchLinger is how long a key's subscription outlives its last waiter.
const watchLinger = time.Second

// hub holds a Locker's release-notice subscriptions, by channel.
type hub struct {
	l           *Locker
	unsupported []atomic.Bool // per node: Watch said errors.ErrUnsupported

	mu      sync.Mutex
	subs    map[string]*watch
	closed  bool
	lingers sync.WaitGroup // subscriptions waiting out their linger
}

// watch is the subscription of one channel on every node that can.
type watch struct {
	channel string
	ready   chan struct{} // closed once the subscriptions are made

	// guarded by hub.mu
	refs   int
	queue  []*waiter // waiting for a notice, longest waiting first
	busy   *waiter   // woken, its round not yet over
	stops  []func()
	active bool  // at least one node subscribed
	linger Timer // runs while refs is 0
}

func newHub(l *Locker) *hub {
	return &hub{l: l, unsupported: make([]atomic.Bool, len(l.nodes)), subs: make(map[string]*watch)}
}

// join returns the subscription to the release notices of rkey, making it
// if needed; its subscribing is bounded by the node timeout. The caller
// must leave it.
func (h *hub) join(ctx context.Context, rkey string) *watch {
	channel := ReleaseChannel(rkey)
	h.mu.Lock()
	if w := h.subs[channel]; w != nil {
		w.refs++
		if w.linger != nil && w.linger.Stop() {
			h.lingers.Done()
		}
		w.linger = nil
		h.mu.Unlock()
		<-w.ready
		return w
	}
	w := &watch{channel: channel, ready: make(chan struct{}), refs: 1}
	if !h.closed {
		h.subs[channel] = w
	}
	h.mu.Unlock()

	sctx, cancel := h.l.detached(ctx)
	stops := make([]func(), len(h.l.nodes))
	var wg sync.WaitGroup
	for i, n := range h.l.nodes {
		wn, ok := n.(Watcher)
		if !ok || h.unsupported[i].Load() {
			continue
		}
		wg.Go(func() {
			stop, err := wn.Watch(sctx, channel, func() { h.notify(w) })
			switch {
			case err == nil:
				stops[i] = stop
			case errors.Is(err, errors.ErrUnsupported):
				h.unsupported[i].Store(true)
			}
		})
	}
	wg.Wait()
	cancel()

	h.mu.Lock()
	for _, stop := range stops {
		if stop != nil {
			w.stops = append(w.stops, stop)
		}
	}
	w.active = len(w.stops) > 0
	close(w.ready)
	h.mu.Unlock()
	return w
}

// waiter is one Acquire call waiting on a watch.
type waiter struct {
	woken  chan struct{} // receives a token when a notice picks it
	queued bool          // guarded by hub.mu
}

func newWaiter() *waiter { return &waiter{woken: make(chan struct{}, 1)} }

// arm puts me in the queue, if not there already: called before each
// round, so that a release during the round counts.
func (h *hub) arm(w *watch, me *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !me.queued {
		me.queued = true
		w.queue = append(w.queue, me)
	}
}

// roundOver is called after each of me's rounds: notices count again.
func (h *hub) roundOver(w *watch, me *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.busy == me {
		w.busy = nil
	}
}

// notify wakes the longest waiting waiter, unless a woken one is still in
// its round.
func (h *hub) notify(w *watch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.busy != nil || len(w.queue) == 0 {
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
	w.refs--
	if w.refs > 0 {
		h.mu.Unlock()
		return
	}
	if h.closed || h.subs[w.channel] != w {
		// Close has passed, or the Locker was closing when w was made.
		delete(h.subs, w.channel)
		stops := w.stops
		w.stops = nil
		h.mu.Unlock()
		runAll(stops)
		return
	}
	h.lingers.Add(1)
	w.linger = h.l.o.clock.AfterFunc(watchLinger, func() {
		defer h.lingers.Done()
		h.mu.Lock()
		if w.refs > 0 || h.subs[w.channel] != w {
			h.mu.Unlock()
			return
		}
		delete(h.subs, w.channel)
		stops := w.stops
		w.stops, w.linger = nil, nil
		h.mu.Unlock()
		runAll(stops)
	})
	h.mu.Unlock()
}

// close ends every subscription; no waiter may be left (Close waits for
// Acquire calls first).
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	var stops []func()
	for ch, w := range h.subs {
		if w.refs > 0 {
			continue
		}
		if w.linger != nil && w.linger.Stop() {
			h.lingers.Done()
		}
		w.linger = nil
		stops = append(stops, w.stops...)
		w.stops = nil
		delete(h.subs, ch)
	}
	h.mu.Unlock()
	runAll(stops)
	h.lingers.Wait()
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
