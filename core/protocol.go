package core

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is the lock protocol: every byte sent to a node is decided
// here. A lock kind (lockKind) says what a lock on its keys sends; the
// rest of core sends it without knowing which kind it is. The scheme and
// its scripts: docs/design.md.

// request is one call of the protocol to a node: a script with its keys
// and arguments, or (setNX) SET keys[0] to the first argument NX PX with
// the TTL. Its arguments are held inline: a request is one allocation at
// most.
type request struct {
	script driver.Script
	setNX  bool
	argc   uint8
	keys   []string
	argv   [maxArgs]string
}

// maxArgs is the most arguments a request has.
const maxArgs = 3

// newRequest returns the request of script s with keys and args.
func newRequest(s driver.Script, keys []string, args ...string) request {
	r := request{script: s, keys: keys, argc: uint8(len(args))}
	copy(r.argv[:], args)
	return r
}

// args returns r's arguments.
func (r *request) args() []string { return r.argv[:r.argc] }

// lockKind is what one kind of lock sends to a node: its grant, extend,
// release and inspect requests. Rounds, validity, identity, node health,
// the hand-off and the keeper use it without knowing the kind, and read
// every answer as answerOf and grantCall do (docs/design.md, lock kinds).
// mutex is the first kind.
type lockKind interface {
	// stored names the lock as stored: its key with the key prefix.
	stored() string
	// queue is the key of its wait queue on the herald, "" if it has none.
	queue() string
	// fence is the key of its fencing counter, "" without fencing: a
	// grant then answers with the counter, which the raise brings to the
	// token on a quorum (fencing.go).
	fence() string
	// grant returns the requests that acquire value on a node, without
	// and with the restart guard.
	grant(value string) (plain, guarded request)
	// extend returns the request that resets value's TTL on a node.
	extend(value string) request
	// release returns the request that deletes value on a node; on the
	// herald (herald true) it also hands the lock to the oldest waiter.
	release(value string, herald bool) request
	// inspect returns the request that reads the lock's state (inspect.go).
	inspect() request
}

// mutex is the plain lock: one key, set to the holder's value with SET NX
// PX (or a script, with fencing or the restart guard), as redsync and
// node-redlock set it.
type mutex struct {
	rkey, qkey, fenceKey string
	ttl, guardMillis     string // in milliseconds, for the scripts
	// names backs the requests' keys: rkey and qkey (the herald's release,
	// or rkey alone), rkey and fenceKey (the fenced grant), rkey, BirthKey
	// and fenceKey (the guarded grant, without fenceKey when not fenced).
	names [7]string
}

// newMutex returns the mutex on key, or refuses a key the protocol cannot
// use.
func (l *Locker) newMutex(key string) (*mutex, error) {
	rkey, fence, err := l.storedKeys(key)
	if err != nil {
		return nil, err
	}
	m := &mutex{rkey: rkey, fenceKey: fence, ttl: l.ttlMillis, guardMillis: l.guardMillis}
	// A key whose queue cannot share its cluster slot has none: waiters poll.
	if q, ok := driver.QueueKey(rkey); ok {
		m.qkey = q
	}
	m.names = [7]string{rkey, m.qkey, rkey, fence, rkey, driver.BirthKey, fence}
	return m, nil
}

func (m *mutex) stored() string { return m.rkey }
func (m *mutex) queue() string  { return m.qkey }
func (m *mutex) fence() string  { return m.fenceKey }

func (m *mutex) grant(value string) (plain, guarded request) {
	guarded = newRequest(driver.ScriptAcquireGuarded, m.names[4:7], value, m.ttl, m.guardMillis)
	switch {
	case m.fenceKey == "":
		guarded.keys = m.names[4:6]
		plain = newRequest(0, m.names[:1], value)
		plain.setNX = true
	default:
		plain = newRequest(driver.ScriptAcquireFenced, m.names[2:4], value, m.ttl)
	}
	return plain, guarded
}

func (m *mutex) extend(value string) request {
	return newRequest(driver.ScriptExtend, m.names[:1], value, m.ttl)
}

func (m *mutex) release(value string, herald bool) request {
	if !herald || m.qkey == "" {
		return newRequest(driver.ScriptRelease, m.names[:1], value)
	}
	return newRequest(driver.ScriptRelease, m.names[:2], value, driver.ReleaseChannel(m.rkey))
}

func (m *mutex) inspect() request { return newRequest(driver.ScriptInspect, m.names[:1]) }

// send makes request r to node i and returns the reply: SET NX PX's as 1
// (set) or nil.
func (l *Locker) send(ctx context.Context, i int, r *request) (any, error) {
	if !r.setNX {
		return l.eval(ctx, i, r.script, r.keys, r.args())
	}
	set, err := l.nodes[i].SetNX(ctx, r.keys[0], r.argv[0], l.o.ttl)
	if err != nil || !set {
		return nil, err
	}
	return int64(1), nil
}

// grantCall is what an acquiring round asks node i: k's grant of value,
// guarded where the restart guard applies. A fenced grant's counters go
// to the returned slice; a young node's refusal is a restartGuardError.
func (l *Locker) grantCall(k lockKind, value string) (nodeCall, []atomic.Int64) {
	var counters []atomic.Int64 // atomic: a suspect call may write after the round
	if k.fence() != "" {
		counters = make([]atomic.Int64, len(l.nodes))
	}
	st := new(struct{ plain, guarded request }) // one allocation
	st.plain, st.guarded = k.grant(value)
	return func(ctx context.Context, i int) (bool, error) {
		r := &st.plain
		if l.guarded != nil && l.guarded[i] {
			r = &st.guarded
		}
		reply, err := l.send(ctx, i, r)
		if err != nil {
			return false, err
		}
		c, ok := reply.(int64)
		switch {
		case !ok && reply != nil:
			return false, fmt.Errorf("quorumlock: unexpected reply %#v to the %s script", reply, r.script.Name())
		case c < 0:
			return false, &restartGuardError{Age: time.Duration(-1-c) * time.Millisecond, MinAge: l.guardMin}
		case counters != nil:
			counters[i].Store(c)
		}
		return c > 0, nil
	}, counters
}

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

// sendBatch makes reqs (script requests all) to node i in one round trip:
// each by SHA once the node is known to have its script, else by source;
// those that met NOSCRIPT go again by source, in a second round trip. It
// returns each request's call, with its Reply and Err.
func (l *Locker) sendBatch(ctx context.Context, i int, b driver.Batcher, reqs []request) []driver.Call {
	calls := make([]driver.Call, len(reqs))
	loaded := l.loaded[i].Load()
	for j := range reqs {
		calls[j] = driver.Call{Keys: reqs[j].keys, Args: reqs[j].args()}
		if s := reqs[j].script; loaded&bit(s) != 0 {
			calls[j].SHA = s.SHA()
		} else {
			calls[j].Source = s.Source()
		}
	}
	b.EvalBatch(ctx, calls)
	var missing []int
	node := l.nodes[i]
	for j := range calls {
		if calls[j].Err != nil && node.Classify(calls[j].Err) == driver.KindNoScript {
			missing = append(missing, j)
			l.loaded[i].And(^bit(reqs[j].script))
		}
	}
	if len(missing) > 0 {
		again := make([]driver.Call, len(missing))
		for x, j := range missing {
			again[x] = driver.Call{Source: reqs[j].script.Source(), Keys: calls[j].Keys, Args: calls[j].Args}
		}
		b.EvalBatch(ctx, again)
		for x, j := range missing {
			calls[j] = again[x]
		}
	}
	var ran uint32
	for j := range calls {
		if calls[j].Err == nil {
			ran |= bit(reqs[j].script)
		}
	}
	l.loaded[i].Or(ran)
	return calls
}

// requestVote makes one of the compare-and-act requests to node i and
// reports whether the node said yes (see requestAnswer).
func (l *Locker) requestVote(ctx context.Context, i int, r *request) (bool, error) {
	a, err := l.requestAnswer(ctx, i, r)
	return a > 0, err
}

// requestAnswer makes one of the compare-and-act requests to node i and
// returns its answer (see answerOf). A node failure that leaves time on
// ctx is retried once; only a yes from the retry counts, else the first
// failure is returned (docs/design.md, running a script twice).
func (l *Locker) requestAnswer(ctx context.Context, i int, r *request) (int64, error) {
	a, err := l.requestAnswerOnce(ctx, i, r)
	if err == nil || ctx.Err() != nil || l.nodes[i].Classify(err) != driver.KindNodeFailure {
		return a, err
	}
	l.unverify(i) // a new connection: its yes waits for the identity check
	if again, err2 := l.requestAnswerOnce(ctx, i, r); err2 == nil && again > 0 {
		return again, nil
	}
	return 0, err
}

func (l *Locker) requestAnswerOnce(ctx context.Context, i int, r *request) (int64, error) {
	reply, err := l.send(ctx, i, r)
	if err != nil {
		return 0, err
	}
	return answerOf(r.script, reply)
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
