package core

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"github.com/quorumlock/quorumlock/core/driver"
	"strconv"
	"time"
)

// This file is the lock protocol: every byte that quorumlock sends to a node
// is decided here. The scheme is the Redlock specification's, so that locks
// interoperate with other Redlock clients that use it (redsync among them):
//
//	acquire  SET key value NX PX ttl
//	extend   if GET key == value then PEXPIRE key ttl      (ScriptExtend)
//	release  if GET key == value then DEL key and          (ScriptRelease)
//	         hand over to the oldest queued ticket         (herald node only)
//
// Waiters that lost a round to a holder queue on one node, the herald (the
// first node by name): ScriptEnqueue appends a ticket to the key's wait
// queue there, and the herald's release pops the oldest ticket and
// publishes it on its Locker's WaiterChannel, so that exactly that waiter
// wakes and takes the lock: first come, first served, without a herd. The queue decides only who tries
// next, never who holds the lock: that is still SET NX on a quorum.
//
// With fencing tokens on (WithFencing), acquisition is a script that also
// increments a counter kept beside the key (ScriptAcquireFenced), and a
// second step raises the counter to the token on the nodes
// (ScriptRaiseFence); see Lock.Token.
//
// With the restart guard on (WithRestartGuard, the default for three nodes
// or more), acquisition is a script that also reads the node's age from its
// birth key (ScriptAcquireGuarded), and a node that restarted too recently
// to have forgotten only expired locks sets nothing and does not vote.
//
// Before a node's first yes counts, and again after a call to it failed,
// core asks the server who it is (ScriptIdentify, with IdentityKey): a
// server that already votes under another node's name does not vote
// again.
//
// The scripts run with EVALSHA and fall back to EVAL on NOSCRIPT, so a node
// that restarted or ran SCRIPT FLUSH keeps working; a node that has not yet
// seen a script from this Locker gets EVAL straight away.

// newValue returns ValueBytes random bytes from crypto/rand, base64url
// encoded (27 characters): unique per acquisition, so that only its owner
// can extend or release a lock.
func newValue() string {
	var b [driver.ValueBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// millis formats a TTL for PX and PEXPIRE.
func millis(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// eval runs s on node i: by SHA once the node is known to have the script,
// by source (EVAL, which also caches it) the first time and whenever the
// node answers NOSCRIPT, as after a restart or SCRIPT FLUSH. Remembering
// what each node has seen saves the NOSCRIPT round trip that a blind
// EVALSHA costs on every fresh server.
func (l *Locker) eval(ctx context.Context, i int, s driver.Script, keys, args []string) (any, error) {
	n := l.nodes[i]
	if l.loaded[i].Load()&bit(s) != 0 {
		reply, err := n.EvalSHA(ctx, s.SHA(), keys, args)
		if err == nil || n.Classify(err) != driver.KindNoScript {
			return reply, err
		}
		l.loaded[i].And(^bit(s))
	}
	reply, err := n.Eval(ctx, s.Source(), keys, args)
	if err == nil {
		l.loaded[i].Or(bit(s))
	}
	return reply, err
}

// scriptVote runs one of the compare-and-act scripts on node i and
// reports whether the node said yes (see scriptAnswer).
func (l *Locker) scriptVote(ctx context.Context, i int, s driver.Script, keys, args []string) (bool, error) {
	a, err := l.scriptAnswer(ctx, i, s, keys, args)
	return a > 0, err
}

// scriptAnswer runs one of the compare-and-act scripts on node i; they
// reply 1 when the key held the value and 0 when it did not (and the
// release script 2 when it also handed the lock to a queued waiter).
//
// A node failure that leaves time on ctx (a refused or reset connection,
// typically a pooled connection to a server that restarted since it was
// last used) is retried once at once, and the node's identity is checked
// again before its yes counts (identity.go): the scripts are idempotent,
// so a second run cannot do harm. Only a "yes" from the retry counts;
// anything else reports the first failure, because a first attempt whose
// reply was lost may have acted (a release that deleted the key makes the
// retry answer 0, which must not read as "someone else holds it").
func (l *Locker) scriptAnswer(ctx context.Context, i int, s driver.Script, keys, args []string) (int64, error) {
	a, err := l.scriptAnswerOnce(ctx, i, s, keys, args)
	if err == nil || ctx.Err() != nil || l.nodes[i].Classify(err) != driver.KindNodeFailure {
		return a, err
	}
	// The retry goes out on a new connection: its yes counts only once
	// the node has proved which server it is again (identity.go).
	l.unverify(i)
	if again, err2 := l.scriptAnswerOnce(ctx, i, s, keys, args); err2 == nil && again > 0 {
		return again, nil
	}
	return 0, err
}

func (l *Locker) scriptAnswerOnce(ctx context.Context, i int, s driver.Script, keys, args []string) (int64, error) {
	reply, err := l.eval(ctx, i, s, keys, args)
	if err != nil {
		return 0, err
	}
	return answerOf(s, reply)
}

// voteOf reads the reply of a compare-and-act script as a yes or a no.
func voteOf(s driver.Script, reply any) (bool, error) {
	a, err := answerOf(s, reply)
	return a > 0, err
}

// answerOf reads the reply of a compare-and-act script: 1 is yes, 0 or nil
// no, 2 (release only) yes and handed over, anything else an error.
func answerOf(s driver.Script, reply any) (int64, error) {
	switch v := reply.(type) {
	case int64:
		if v == 0 || v == 1 || (v == 2 && s == driver.ScriptRelease) {
			return v, nil
		}
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("quorumlock: unexpected reply %#v to the %s script", reply, s.Name())
}

// bit is s's bit in Locker.loaded.
func bit(s driver.Script) uint32 { return 1 << s }
