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
//	         PUBLISH ReleaseChannel(key) ""
//
// With fencing tokens on (WithFencing), acquisition is a script that also
// increments a counter kept beside the key (ScriptAcquireFenced), and a
// second step raises the counter to the token on the nodes
// (ScriptRaiseFence); see Lock.Token.
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
	// ScriptRelease deletes KEYS[1] if it holds ARGV[1] and then, when
	// ARGV[2] is given (core always gives ReleaseChannel of the key),
	// publishes an empty message on that channel, which wakes the waiters of
	// a Watcher. It returns the number of keys deleted (1 or 0).
	ScriptRelease = newScript(1<<0, "release", `if redis.call("get", KEYS[1]) == ARGV[1] then
	redis.call("del", KEYS[1])
	if ARGV[2] then
		redis.call("publish", ARGV[2], "")
	end
	return 1
end
return 0`)

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
)

// Scripts returns every script of the protocol.
func Scripts() []*Script {
	return []*Script{ScriptRelease, ScriptExtend, ScriptAcquireFenced, ScriptRaiseFence}
}

// ReleaseChannel is the pub/sub channel on which ScriptRelease announces
// that it deleted key (the stored key, with the Locker's prefix).
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
func FenceKey(key string) (counter string, ok bool) {
	if hasHashTag(key) {
		counter = key + FenceSuffix
	} else {
		counter = "{" + key + "}" + FenceSuffix
	}
	return counter, HashSlot(counter) == HashSlot(key)
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

// scriptVote runs one of the compare-and-act scripts on node i; they reply
// 1 when the key held the value and 0 when it did not.
//
// A node failure that leaves time on ctx (a refused or reset connection,
// typically a pooled connection to a server that restarted since it was
// last used) is retried once at once: both scripts are idempotent, so a
// second run cannot do harm. Only a "yes" from the retry counts; anything
// else reports the first failure, because a first attempt whose reply was
// lost may have acted (a release that deleted the key makes the retry
// answer 0, which must not read as "someone else holds it").
func (l *Locker) scriptVote(ctx context.Context, i int, s *Script, keys, args []string) (bool, error) {
	ok, err := l.scriptVoteOnce(ctx, i, s, keys, args)
	if err == nil || ctx.Err() != nil || l.nodes[i].Classify(err) != KindNodeFailure {
		return ok, err
	}
	if again, err2 := l.scriptVoteOnce(ctx, i, s, keys, args); err2 == nil && again {
		return true, nil
	}
	return false, err
}

func (l *Locker) scriptVoteOnce(ctx context.Context, i int, s *Script, keys, args []string) (bool, error) {
	reply, err := l.eval(ctx, i, s, keys, args)
	if err != nil {
		return false, err
	}
	return voteOf(s, reply)
}

// voteOf reads the reply of a compare-and-act script: 1 is yes, 0 or nil
// no, anything else an error.
func voteOf(s *Script, reply any) (bool, error) {
	switch v := reply.(type) {
	case int64:
		if v == 0 || v == 1 {
			return v == 1, nil
		}
	case nil:
		return false, nil
	}
	return false, fmt.Errorf("quorumlock: unexpected reply %#v to the %s script", reply, s.name)
}
