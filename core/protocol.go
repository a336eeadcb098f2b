package core

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is the lock protocol: every byte sent to a node is decided
// here. The scheme and its scripts: docs/design.md.

// newValue returns a lock value: ValueBytes random bytes, base64url encoded.
func newValue() string {
	var b [driver.ValueBytes]byte
	_, _ = rand.Read(b[:]) // never fails: it crashes the program instead
	var v [valueLen]byte   // on the stack: one allocation, the string's
	base64.RawURLEncoding.Encode(v[:], b[:])
	return string(v[:])
}

// valueLen is the length of a lock value: ValueBytes in base64 without padding.
const valueLen = (driver.ValueBytes*8 + 5) / 6

// millis formats a TTL for PX and PEXPIRE.
func millis(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// eval runs s on node i: by SHA once the node is known to have it, else
// (and after NOSCRIPT) by source.
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

// evalBatch runs calls of s on node i in one round trip: by SHA once the
// node is known to have s, else by source; the calls that met NOSCRIPT go
// again by source, in a second round trip. It sets each call's SHA or
// Source, and its Reply and Err.
func (l *Locker) evalBatch(ctx context.Context, i int, b driver.Batcher, s driver.Script, calls []driver.Call) {
	byHash := l.loaded[i].Load()&bit(s) != 0
	for j := range calls {
		if byHash {
			calls[j].SHA, calls[j].Source = s.SHA(), ""
		} else {
			calls[j].SHA, calls[j].Source = "", s.Source()
		}
	}
	b.EvalBatch(ctx, calls)
	var missing []int
	node := l.nodes[i]
	for j := range calls {
		if calls[j].Err != nil && node.Classify(calls[j].Err) == driver.KindNoScript {
			missing = append(missing, j)
		}
	}
	if len(missing) > 0 {
		l.loaded[i].And(^bit(s))
		again := make([]driver.Call, len(missing))
		for x, j := range missing {
			again[x] = driver.Call{Source: s.Source(), Keys: calls[j].Keys, Args: calls[j].Args}
		}
		b.EvalBatch(ctx, again)
		for x, j := range missing {
			calls[j] = again[x]
		}
	}
	for j := range calls {
		if calls[j].Err == nil {
			l.loaded[i].Or(bit(s))
			break
		}
	}
}

// scriptVote runs one of the compare-and-act scripts on node i and
// reports whether the node said yes (see scriptAnswer).
func (l *Locker) scriptVote(ctx context.Context, i int, s driver.Script, keys, args []string) (bool, error) {
	a, err := l.scriptAnswer(ctx, i, s, keys, args)
	return a > 0, err
}

// scriptAnswer runs one of the compare-and-act scripts on node i and
// returns its answer (see answerOf). A node failure that leaves time on
// ctx is retried once; only a yes from the retry counts, else the first
// failure is returned (docs/design.md, running a script twice).
func (l *Locker) scriptAnswer(ctx context.Context, i int, s driver.Script, keys, args []string) (int64, error) {
	a, err := l.scriptAnswerOnce(ctx, i, s, keys, args)
	if err == nil || ctx.Err() != nil || l.nodes[i].Classify(err) != driver.KindNodeFailure {
		return a, err
	}
	l.unverify(i) // a new connection: its yes waits for the identity check
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
