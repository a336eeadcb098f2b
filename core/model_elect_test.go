package core_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quorumlock/quorumlock/core"
)

// The model test's leader election (model_test.go hooks it in: the
// Campaign step, and checkTerms among the checks). A leader is an
// exclusive holder of its key to the model's other checks; its terms are
// checked against a reference model of terms:
//
//  T1. one leader per term: no two leaders of a key share a term;
//  T2. terms increase: a leader whose Campaign began after another leader
//      of the key was elected has a greater term;
//  T3. no two leaders of a key at once, each counted from its Campaign's
//      return to its resignation or the end of its validity.
//
// T1 and T2 assume the nodes keep their counters: a seed in which a node
// restarted empty checks T3 alone.

// campaign has the step's Locker campaign for the step's key; the leader
// is kept alive by Campaign, and resigns by the Release step.
func (w *world) campaign(s step) {
	ml, key := w.lockers[s.locker], w.p.keys[s.key]
	h := holder{key: key, keys: []string{key}, leader: true}
	w.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond+s.d)
		defer cancel()
		start := w.enterCall(key, +1)
		lock, err := ml.l.Campaign(ctx, key, fmt.Sprintf("L%d", ml.id))
		if err == nil {
			w.took(ml, h, lock, start)
			w.mu.Lock()
			if i := slices.IndexFunc(w.locks, func(r *lockRec) bool { return r.lock == lock }); i >= 0 {
				w.locks[i].keptAlive = true // Campaign keeps its leader alive
			}
			w.mu.Unlock()
		}
		w.enterCall(key, -1)
		w.logf("L%d Campaign %s: %v %.6s term %d", ml.id, key, short(err), lock.Value(), lock.Token())
		w.expect("Campaign", err, core.ErrNotAcquired, core.ErrUnavailable, core.ErrNodeRestarted, core.ErrValidityExpired,
			core.ErrClosed, context.DeadlineExceeded, w.badKeys(ml, h))
	})
}

// checkTerms checks the leaders against the model of terms (T1-T3).
func (w *world) checkTerms() {
	w.mu.Lock()
	defer w.mu.Unlock()
	restarted := slices.ContainsFunc(w.nodeState, func(n nodeState) bool { return len(n.restarts) > 0 })
	var leaders []*lockRec
	for _, r := range w.locks {
		if r.leader {
			leaders = append(leaders, r)
		}
	}
	for i, a := range leaders {
		for _, b := range leaders[i+1:] {
			if a.key != b.key {
				continue
			}
			w.violations = append(w.violations, termViolations(a, b, restarted)...)
		}
	}
}

// termViolations checks two leaders of one key against T1-T3; without
// the nodes' counters (restarted), against T3 alone.
func termViolations(a, b *lockRec, restarted bool) []string {
	var out []string
	ta, tb := a.lock.Token(), b.lock.Token()
	if !restarted {
		if ta == tb {
			out = append(out, fmt.Sprintf("T1: %s and %s are both leaders of %s in term %d", a.name, b.name, a.key, ta))
		}
		for _, p := range [][2]*lockRec{{a, b}, {b, a}} {
			first, next := p[0], p[1]
			if first.from.Before(next.start) && first.lock.Token() >= next.lock.Token() {
				out = append(out, fmt.Sprintf("T2: %s's term %d is not above %s's %d, elected before its Campaign began",
					next.name, next.lock.Token(), first.name, first.lock.Token()))
			}
		}
	}
	if overlap(a, b) {
		out = append(out, fmt.Sprintf("T3: %s (term %d) and %s (term %d) lead %s at once", a.name, ta, b.name, tb, a.key))
	}
	return out
}

// overlap reports whether a and b led at once: their terms, each from
// its Campaign's return to its end (zero until: still leading), share an
// instant. A term that ended as it began ([t, t)) shares none.
func overlap(a, b *lockRec) bool {
	before := func(t, until time.Time) bool { return until.IsZero() || t.Before(until) }
	return before(a.from, b.until) && before(b.from, a.until) && before(a.from, a.until) && before(b.from, b.until)
}
