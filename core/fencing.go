package core

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
)

// raiseFence is the second step of a fenced acquisition: it returns the
// token (the largest granting counter) once a quorum of the nodes that
// granted the lock holds at least it, raising every node that answered
// (docs/design.md, fencing: the raise).
//
// Only granting nodes count toward that quorum. A node that refused holds
// another owner's key, typically a round still under way whose calls to the
// other nodes are late: it may have read its counter there before this
// raise, and complete its quorum on nodes that this lock leaves behind once
// released, drawing this token again after this critical section. A node
// that holds this lock's key can grant the next owner only after this
// release, so after the raise.
func (l *Locker) raiseFence(ctx context.Context, key string, k lockKind, results []NodeResult, counters []atomic.Int64) (int64, *QuorumError) {
	var token int64
	for i := range results {
		if results[i].Outcome == OutcomeOK {
			token = max(token, counters[i].Load())
		}
	}
	n, behind := 0, 0
	for i := range results {
		switch {
		case atToken(results[i], counters[i].Load(), token):
			n++
		case answered(results[i]):
			behind++
		}
	}
	if n >= l.o.quorum && behind == 0 {
		return token, nil
	}
	// With a quorum at the token already, nodes that did not answer are skipped.
	enough, t := n >= l.o.quorum, token // copies: the fast path allocates nothing
	raise := k.raise(strconv.FormatInt(token, 10))
	raised := l.askNodes(ctx, releaseStrategy, func(ctx context.Context, i int) (bool, error) {
		if at := atToken(results[i], counters[i].Load(), t); at || enough && !answered(results[i]) {
			return at, nil
		}
		return l.requestVote(ctx, i, &raise)
	})
	n = 0
	for i := range raised {
		if results[i].Outcome != OutcomeOK {
			// A refused or young node is raised, but does not count: the
			// error shows its acquisition's answer, not the raise's.
			raised[i] = results[i]
			continue
		}
		if raised[i].Outcome == OutcomeOK || counters[i].Load() == token {
			n++
		}
	}
	if n >= l.o.quorum {
		return token, nil
	}
	return 0, &QuorumError{Op: OpAcquire, Key: key, Quorum: l.o.quorum, Reason: ErrUnavailable, Nodes: raised}
}

// atToken reports whether a node granted an acquisition with the token as
// its counter.
func atToken(r NodeResult, counter, token int64) bool {
	return r.Outcome == OutcomeOK && counter == token
}

// answered reports whether a node answered an acquisition: it granted,
// refused, or is young (it lost its counter and needs the raise most).
func answered(r NodeResult) bool {
	return r.Outcome == OutcomeOK || r.Outcome == OutcomeRefused || errors.Is(r.Err, ErrNodeRestarted)
}
