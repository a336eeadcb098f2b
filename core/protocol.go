package core

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"fmt"
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

// ValueBytes is the number of random bytes in a lock value.
const ValueBytes = 20

// Script is one Lua script of the lock protocol, with its SHA1 for EVALSHA.
type Script struct {
	name, source, sha string
	bit               uint32 // this script's bit in Locker.loaded
}

func newScript(bit uint32, name, source string) *Script {
	sum := sha1.Sum([]byte(source))
	return &Script{name: name, source: source, sha: hex.EncodeToString(sum[:]), bit: bit}
}

// Name is the script's short name, such as "release".
func (s *Script) Name() string { return s.name }

// Source is the Lua text, as sent with EVAL.
func (s *Script) Source() string { return s.source }

// SHA is the hex SHA1 of Source, as sent with EVALSHA.
func (s *Script) SHA() string { return s.sha }

// The scripts of the protocol. Backends that cannot run Lua (such as
// backends/memory) recognise them by SHA and implement their semantics.
var (
	// ScriptRelease deletes KEYS[1] if it holds ARGV[1] and returns 1, or
	// returns 0. When the wait queue KEYS[2] and the channel prefix ARGV[2]
	// are given (core gives them to the herald node only, with
	// ReleaseChannel of the key: see Locker) and the queue is not empty, it
	// then hands the lock over: it pops the ticket at the queue's head,
	// publishes it on the channel of the ticket's owner (WaiterChannel:
	// only that Locker hears it, and only that waiter wakes), and returns 2.
	ScriptRelease = newScript(1<<0, "release", `if redis.call("get", KEYS[1]) ~= ARGV[1] then
	return 0
end
redis.call("del", KEYS[1])
local ticket = KEYS[2] and ARGV[2] and redis.call("lpop", KEYS[2])
if ticket then
	redis.call("publish", ARGV[2] .. ":" .. string.match(ticket, "^[^.]*"), ticket)
	return 2
end
return 1`)

	// ScriptExtend sets the expiry of KEYS[1] to ARGV[2] milliseconds if it
	// holds ARGV[1], and returns 1 if it did, else 0.
	ScriptExtend = newScript(1<<1, "extend", `if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("pexpire", KEYS[1], ARGV[2])
end
return 0`)

	// ScriptAcquireFenced sets KEYS[1] to ARGV[1] with an expiry of ARGV[2]
	// milliseconds if it does not exist, as SET NX PX does, and then
	// increments the counter KEYS[2] and returns its new value; it returns
	// 0 if the key existed.
	ScriptAcquireFenced = newScript(1<<2, "acquire-fenced", `if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return redis.call("incr", KEYS[2])
end
return 0`)

	// ScriptRaiseFence raises the counter KEYS[1] to ARGV[1] if it is
	// lower (a missing counter counts as 0), and returns 1.
	ScriptRaiseFence = newScript(1<<3, "raise-fence", `local t = tonumber(ARGV[1])
if (tonumber(redis.call("get", KEYS[1])) or 0) < t then
	redis.call("set", KEYS[1], ARGV[1])
end
return 1`)

	// ScriptEnqueue appends the waiter ticket ARGV[1] to the wait queue
	// KEYS[2] of the lock KEYS[1], and sets the queue to expire after
	// ARGV[2] milliseconds, returning 1; but when ARGV[3] is not "force"
	// and the lock is free, it does nothing and returns 0: the waiter
	// should try again at once rather than wait for a release that
	// already happened.
	ScriptEnqueue = newScript(1<<4, "enqueue", `if ARGV[3] ~= "force" and redis.call("exists", KEYS[1]) == 0 then
	return 0
end
redis.call("rpush", KEYS[2], ARGV[1])
redis.call("pexpire", KEYS[2], ARGV[2])
return 1`)

	// ScriptDequeue removes the waiter ticket ARGV[1] from the wait queue
	// KEYS[1] and returns how many entries it removed.
	ScriptDequeue = newScript(1<<5, "dequeue", `return redis.call("lrem", KEYS[1], 0, ARGV[1])`)

	// ScriptAcquireGuarded is the acquisition under the restart guard (see
	// WithRestartGuard). KEYS[2] is the node's birth key (BirthKey): when
	// the server's data began, in milliseconds of the server's TIME, never
	// expiring, so that a restart without persistence loses it. When the
	// key is missing, the script writes the time the server process started
	// (TIME less INFO's uptime_in_seconds; TIME itself where INFO cannot be
	// called), since data the server holds cannot be older than that. It
	// computes the node's age from it (0 when the clock went back; a birth
	// time of 0 marks an adopted node, old whatever the clock says). A node
	// younger than ARGV[3] milliseconds sets nothing and returns -1 - age
	// (a negative number). Otherwise it sets KEYS[1] to ARGV[1] with an
	// expiry of ARGV[2] milliseconds if it does not exist, as SET NX PX
	// does, and returns 0 if it existed; when it set it, it returns 1, or,
	// when the fencing counter KEYS[3] is given, increments it and returns
	// its new value, as ScriptAcquireFenced does.
	ScriptAcquireGuarded = newScript(1<<6, "acquire-guarded", `local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local born = tonumber(redis.call("get", KEYS[2]))
if not born then
	born = now
	local info = redis.pcall("info", "server")
	if type(info) == "string" then
		local up = tonumber(string.match(info, "uptime_in_seconds:(%d+)"))
		if up then
			born = now - up * 1000
		end
	end
	redis.call("set", KEYS[2], string.format("%d", born))
end
if born ~= 0 then
	local age = math.max(now - born, 0)
	if age < tonumber(ARGV[3]) then
		return -1 - age
	end
end
if not redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return 0
end
if KEYS[3] then
	return redis.call("incr", KEYS[3])
end
return 1`)

	// ScriptAdopt sets the birth key KEYS[1] to 0, which marks the node
	// adopted: old to the restart guard at once. It returns 1; see
	// Locker.Adopt.
	ScriptAdopt = newScript(1<<7, "adopt", `redis.call("set", KEYS[1], "0")
return 1`)

	// ScriptIdentify reads the server's identity from KEYS[1] (IdentityKey)
	// and returns it; when the key is missing, it first sets it to ARGV[1],
	// a fresh random value, with no expiry. Core runs it before a node's
	// first yes counts and again after a failure, so that one server
	// reached under two names votes once (see New).
	ScriptIdentify = newScript(1<<8, "identify", `local id = redis.call("get", KEYS[1])
if not id then
	id = ARGV[1]
	redis.call("set", KEYS[1], id)
end
return id`)
)

// BirthKey is the key in which each node that the restart guard watches
// keeps its birth time: when its data began, in milliseconds since the
// Unix epoch of the server's clock. The first guarded acquisition writes
// it as the time the server process started (or "0" for a node adopted
// with Locker.Adopt). It never expires. It is the same for every Locker,
// whatever its key prefix, since it describes the server, not the locks;
// ACLs must let the lock user read and write it (and call INFO). Operators
// can adopt a node by hand with redis-cli SET quorumlock:birth 0.
const BirthKey = "quorumlock:birth"

// IdentityKey is the key in which each server keeps the identity core
// knows it by: a random value that ScriptIdentify writes the first time
// any Locker asks, and that never expires. Like BirthKey it is the same
// for every Locker, whatever its key prefix, since it describes the
// server; ACLs must let the lock user read and write it. Two nodes of one
// Locker that report the same identity are one server, which votes once.
// A server restarted without persistence forgets it and gets a new one.
const IdentityKey = "quorumlock:node"

// Scripts returns every script of the protocol.
func Scripts() []*Script {
	return []*Script{ScriptRelease, ScriptExtend, ScriptAcquireFenced, ScriptRaiseFence, ScriptEnqueue, ScriptDequeue, ScriptAcquireGuarded, ScriptAdopt, ScriptIdentify}
}

// WaiterChannel is the pub/sub channel on which ScriptRelease hands key
// (the stored key) to a waiter of the Locker whose tickets start with
// owner and a dot ("owner.seq"): ReleaseChannel(key), a colon, and owner.
// Each Locker subscribes to its own, so that a hand-off reaches one
// process, not every waiting one.
func WaiterChannel(key, owner string) string { return ReleaseChannel(key) + ":" + owner }

// ReleaseChannel is the prefix of the pub/sub channels on which
// ScriptRelease hands key (the stored key, with the Locker's prefix) to a
// waiter; see WaiterChannel.
func ReleaseChannel(key string) string { return "quorumlock:released:" + key }

// FenceSuffix ends the name of the counter that holds a key's fencing
// tokens; see FenceKey.
const FenceSuffix = ":fence"

// FenceKey returns the name of the fencing-token counter of key (the stored
// key), which must hash to the key's Redis Cluster slot so that one script
// can touch both: the key followed by FenceSuffix when the key has a hash
// tag ("{user:1}:lock" gives "{user:1}:lock:fence"), and otherwise the key
// made a hash tag ("orders:42" gives "{orders:42}:fence"). A key with no
// hash tag that contains "}" cannot be wrapped that way, so it has no
// counter and ok is false; core then refuses the key when fencing is on.
func FenceKey(key string) (counter string, ok bool) { return sideKey(key, FenceSuffix) }

// QueueSuffix ends the name of a key's wait queue; see QueueKey.
const QueueSuffix = ":queue"

// QueueKey returns the name of the wait queue of key (the stored key): a
// Redis list of waiter tickets on the herald node, in key's cluster slot,
// named as FenceKey names the counter but with QueueSuffix. ok is false
// when no such name exists (a key with no hash tag that contains "}"):
// waiters for such a key are not handed the lock and poll with the retry
// delay.
func QueueKey(key string) (queue string, ok bool) { return sideKey(key, QueueSuffix) }

// sideKey names a key that lives beside key in its cluster slot.
func sideKey(key, suffix string) (string, bool) {
	var side string
	if hasHashTag(key) {
		side = key + suffix
	} else {
		side = "{" + key + "}" + suffix
	}
	return side, HashSlot(side) == HashSlot(key)
}

// newValue returns ValueBytes random bytes from crypto/rand, base64url
// encoded (27 characters): unique per acquisition, so that only its owner
// can extend or release a lock.
func newValue() string {
	var b [ValueBytes]byte
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
func (l *Locker) eval(ctx context.Context, i int, s *Script, keys, args []string) (any, error) {
	n := l.nodes[i]
	if l.loaded[i].Load()&s.bit != 0 {
		reply, err := n.EvalSHA(ctx, s.sha, keys, args)
		if err == nil || n.Classify(err) != KindNoScript {
			return reply, err
		}
		l.loaded[i].And(^s.bit)
	}
	reply, err := n.Eval(ctx, s.source, keys, args)
	if err == nil {
		l.loaded[i].Or(s.bit)
	}
	return reply, err
}

// scriptVote runs one of the compare-and-act scripts on node i and
// reports whether the node said yes (see scriptAnswer).
func (l *Locker) scriptVote(ctx context.Context, i int, s *Script, keys, args []string) (bool, error) {
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
func (l *Locker) scriptAnswer(ctx context.Context, i int, s *Script, keys, args []string) (int64, error) {
	a, err := l.scriptAnswerOnce(ctx, i, s, keys, args)
	if err == nil || ctx.Err() != nil || l.nodes[i].Classify(err) != KindNodeFailure {
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

func (l *Locker) scriptAnswerOnce(ctx context.Context, i int, s *Script, keys, args []string) (int64, error) {
	reply, err := l.eval(ctx, i, s, keys, args)
	if err != nil {
		return 0, err
	}
	return answerOf(s, reply)
}

// voteOf reads the reply of a compare-and-act script as a yes or a no.
func voteOf(s *Script, reply any) (bool, error) {
	a, err := answerOf(s, reply)
	return a > 0, err
}

// answerOf reads the reply of a compare-and-act script: 1 is yes, 0 or nil
// no, 2 (release only) yes and handed over, anything else an error.
func answerOf(s *Script, reply any) (int64, error) {
	switch v := reply.(type) {
	case int64:
		if v == 0 || v == 1 || (v == 2 && s == ScriptRelease) {
			return v, nil
		}
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("quorumlock: unexpected reply %#v to the %s script", reply, s.name)
}
