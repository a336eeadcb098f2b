package core

// This file is the restart guard (docs/restart-guard.md).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// guardDelay returns how long Acquire waits for young nodes that left its
// last round (qe, for a lock of kind k) without a quorum, adds it to *guarded and reports it
// (OpWait); 0 for TryAcquire, another loss, or once *guarded reaches
// the guard's minimum age (docs/design.md, waiting for young nodes).
func (l *Locker) guardDelay(ctx context.Context, qe *QuorumError, k lockKind, tries int, guarded *time.Duration) time.Duration {
	if qe.Reason != ErrNodeRestarted || qe.Context != nil || tries == tryOnce || *guarded >= l.guardMin {
		return 0
	}
	wait, _ := guardWait(qe.Nodes, qe.Quorum)
	wait += MinRetryDelay // ages are whole milliseconds
	*guarded += wait
	if l.obs != nil {
		l.obs.Observe(ctx, Event{Kind: OpWait, Key: qe.Key, Lock: kindName(k), Start: l.o.clock.Now(), Duration: wait,
			Err: qe, Nodes: qe.Nodes, Tries: qe.Tries})
	}
	return wait
}

// setGuard decides which nodes the restart guard watches: every node that
// is not sharded, when the guard is on.
func (l *Locker) setGuard() error {
	if l.o.guard <= 0 {
		return nil
	}
	l.guarded = make([]bool, len(l.nodes))
	watched := false
	for i := range l.nodes {
		l.guarded[i] = !l.sharded(i)
		watched = watched || l.guarded[i]
	}
	if !watched && l.o.guardSet {
		return invalid("the restart guard (WithRestartGuard) cannot watch any of these nodes: all are sharded (Redis Clusters); use WithRestartGuard(0)")
	}
	if !watched {
		l.guarded = nil
	}
	l.guardMin = (l.o.guard + l.o.driftFor(l.o.guard)).Truncate(time.Millisecond)
	l.guardMillis = millis(l.guardMin)
	return nil
}

// RestartGuard returns the age from which a node votes under the restart
// guard (its max TTL plus the drift allowance), or 0 when the guard is off.
func (l *Locker) RestartGuard() time.Duration {
	if l.guarded == nil {
		return 0
	}
	return l.guardMin
}

// Adopt tells the restart guard that the named nodes (all it watches when
// no name is given) hold no lock, so that they vote at once: it sets their
// birth key to 0. Never adopt a node that may have restarted while locks
// were held on it (docs/restart-guard.md). Unwatched nodes are left alone.
//
// Each call is bounded by ctx and the node timeout. The error names every
// node that failed (the others are adopted); an unknown name is an
// ErrInvalidArgument, and a closed Locker ErrClosed.
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

// guardWait reports whether young nodes left a round without a quorum it
// could otherwise have had, and how long until enough of them vote.
func guardWait(results []NodeResult, quorum int) (time.Duration, bool) {
	var waits []time.Duration
	failed := 0
	for _, r := range results {
		if r.Outcome != OutcomeFailed {
			continue
		}
		failed++
		if young := (*restartGuardError)(nil); errors.As(r.Err, &young) {
			waits = append(waits, max(young.MinAge-young.Age, 0))
		}
	}
	need := failed - (len(results) - quorum) // young nodes that must vote
	if need <= 0 || need > len(waits) {
		return 0, false
	}
	slices.Sort(waits)
	return waits[need-1], true
}
