package core_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/core"
)

// The model test's semaphores: AcquirePermit and TryAcquirePermit steps
// take one of modelPermits permits of a program key (its slots live
// beside the key: "{k0}:permit:1"), and the reference model checks that
// at most modelPermits hold each at any instant, besides what every lock
// is checked for (its slot is the key its holder claims).

// modelPermits is K of every semaphore of the model.
const modelPermits = 2

// acquirePermit takes a permit of the step's key; "a}b" has no slots in
// its cluster slot and is refused.
func (w *world) acquirePermit(s step, try bool) {
	ml, key := w.lockers[s.locker], w.p.keys[s.key]
	w.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond+s.d)
		defer cancel()
		start := w.enterCall(key, 0)
		acquire, name := ml.l.AcquirePermit, "AcquirePermit"
		if try {
			acquire, name = ml.l.TryAcquirePermit, "TryAcquirePermit"
		}
		lock, err := acquire(ctx, key, modelPermits)
		if err == nil {
			slot := core.PermitSlot(lock)
			w.took(ml, holder{key: key, keys: []string{slot}, sem: key}, lock, start)
		}
		w.logf("L%d %s %s: %v %.6s", ml.id, name, key, short(err), lock.Value())
		var bad error
		if strings.Contains(key, "}") {
			bad = core.ErrInvalidArgument
		}
		w.expect(name, err, core.ErrNotAcquired, core.ErrUnavailable, core.ErrNodeRestarted, core.ErrValidityExpired, core.ErrClosed,
			context.DeadlineExceeded, bad)
	})
}

// checkPermits: at each permit's start, at most modelPermits permits of
// its semaphore are live (those that began before it and end after it
// began, and itself), and a fenced permit's token is above those of its
// semaphore's permits taken before its Acquire began.
func (w *world) checkPermits() {
	hs := w.holders()
	for _, a := range hs {
		if a.sem == "" {
			continue
		}
		var live []string
		for _, b := range hs {
			if b.sem == a.sem && !b.from.After(a.from) && (b.until.IsZero() || a.from.Before(b.until)) {
				live = append(live, fmt.Sprintf("%s on %s", b.name, b.keys[0]))
			}
		}
		if len(live) > modelPermits {
			w.violate("%d permits of %s at %v, more than %d: %s", len(live), a.sem, a.from.Sub(w.t0), modelPermits, strings.Join(live, ", "))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.ContainsFunc(w.nodeState, func(n nodeState) bool { return len(n.restarts) > 0 }) {
		return // a node restarted empty forgets its counters
	}
	for _, r := range w.locks {
		for _, o := range w.locks {
			if r.sem != "" && o.sem == r.sem && r.lock.Token() > 0 && o.lock.Token() > 0 && o.from.Before(r.start) && o.lock.Token() >= r.lock.Token() {
				w.violations = append(w.violations, fmt.Sprintf("%s has token %d, not above %s's %d, a permit of %s taken before it began",
					r.name, r.lock.Token(), o.name, o.lock.Token(), r.sem))
			}
		}
	}
}
