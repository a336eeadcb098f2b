package core

import (
	"context"
	"errors"
	"github.com/quorumlock/quorumlock/core/driver"
	"strconv"
)

// raiseFence is the second step of a fenced acquisition: the token is the
// largest counter of the nodes that granted the lock, and before the lock
// is handed out, a quorum of nodes must hold a counter at least that large,
// so that any later quorum meets one of them and draws a larger token.
//
// Every node that answered is raised, not just a quorum: a quorum is
// enough while nodes keep their counters, but a node that restarts without
// them may be the only one a later quorum shares with this one, and then
// the others of that quorum must know the token too. A node the restart
// guard found young is raised as well, so that it has caught up by the
// time its votes count again. Nothing more is sent when every node that
// answered returned the token (the counters agreed, as they do while every
// node is up), and a raise that a quorum at the token already makes safe
// does not wait for the nodes that did not answer.
func (l *Locker) raiseFence(ctx context.Context, key, fence string, results []NodeResult, counters []int64) (int64, *QuorumError) {
	var token int64
	for i := range results {
		if results[i].Outcome == OutcomeOK {
			token = max(token, counters[i])
		}
	}
	n, behind := 0, 0
	for i := range results {
		switch {
		case atToken(results[i], counters[i], token):
			n++
		case answered(results[i]):
			behind++
		}
	}
	if n >= l.o.quorum && behind == 0 {
		return token, nil
	}
	// With a quorum at the token already, the raise is for the nodes
	// behind only, and does not wait for nodes that did not answer.
	enough, t := n >= l.o.quorum, token // copies: the fast path allocates nothing
	keys, args := []string{fence}, []string{strconv.FormatInt(token, 10)}
	raised := l.round(ctx, releaseStrategy, func(ctx context.Context, i int) (bool, error) {
		if at := atToken(results[i], counters[i], t); at || enough && !answered(results[i]) {
			return at, nil
		}
		return l.scriptVote(ctx, i, driver.ScriptRaiseFence, keys, args)
	})
	n = 0
	for i := range raised {
		if raised[i].Outcome == OutcomeOK || atToken(results[i], counters[i], token) {
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
// refused, or is young after a restart (the restart guard did not count its
// vote; it lost its counter and is the node most in need of a raise).
func answered(r NodeResult) bool {
	return r.Outcome == OutcomeOK || r.Outcome == OutcomeRefused || errors.Is(r.Err, ErrNodeRestarted)
}
