package core

import (
	"context"
	"strconv"
)

// raiseFence is the second step of a fenced acquisition: the token is the
// largest counter of the nodes that granted the lock, and before the lock
// is handed out, a quorum of nodes must hold a counter at least that large,
// so that any later quorum meets one of them and draws a larger token. When
// a quorum already returned the token (the counters agreed, as they do
// while every node is up), nothing more is sent.
func (l *Locker) raiseFence(ctx context.Context, key, fence string, results []NodeResult, counters []int64) (int64, *QuorumError) {
	var token int64
	for i := range results {
		if results[i].Outcome == OutcomeOK {
			token = max(token, counters[i])
		}
	}
	atToken := func(i int) bool { return results[i].Outcome == OutcomeOK && counters[i] == token }
	n := 0
	for i := range results {
		if atToken(i) {
			n++
		}
	}
	if n >= l.o.quorum {
		return token, nil
	}

	keys, args := []string{fence}, []string{strconv.FormatInt(token, 10)}
	raised := l.round(ctx, releaseStrategy, func(ctx context.Context, i int) (bool, error) {
		return l.scriptVote(ctx, i, ScriptRaiseFence, keys, args)
	})
	n = 0
	for i := range raised {
		if raised[i].Outcome == OutcomeOK || atToken(i) {
			n++
		}
	}
	if n >= l.o.quorum {
		return token, nil
	}
	return 0, &QuorumError{Op: OpAcquire, Key: key, Quorum: l.o.quorum, Reason: ErrUnavailable, Nodes: raised}
}
