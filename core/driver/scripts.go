package driver

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
)

// Script is one Lua script of the lock protocol. The scripts are constants:
// no importer can change what core sends.
type Script uint8

// The scripts of the protocol. Backends that cannot run Lua (such as
// backends/memory) recognise them by SHA and implement their semantics.
const (
	// ScriptRelease deletes KEYS[1] if it holds ARGV[1] and returns 1, or
	// returns 0. When the wait queue KEYS[2] and the channel prefix ARGV[2]
	// are given (core gives them to the herald node only, with
	// ReleaseChannel of the key: see Locker) and the queue is not empty, it
	// then hands the lock over: it pops the ticket at the queue's head,
	// publishes it on the channel of the ticket's owner (WaiterChannel:
	// only that Locker hears it, and only that waiter wakes), and returns 2;
	// a shared waiter's ticket (ReaderTicket) brings every shared waiter's
	// ticket queued right behind it along. When it deleted the key and
	// ARGV[3] is given (a leader's key: ARGV[2] is then "" on nodes other
	// than the herald), it first publishes "released" on the channel
	// ARGV[3] (LeaderChannel).
	ScriptRelease Script = iota

	// ScriptExtend sets the expiry of KEYS[1] to ARGV[2] milliseconds if it
	// holds ARGV[1], and returns 1 if it did, else 0.
	ScriptExtend

	// ScriptAcquireFenced sets KEYS[1] to ARGV[1] with an expiry of ARGV[2]
	// milliseconds if it does not exist, as SET NX PX does, and then
	// increments the counter KEYS[2] and returns its new value; it returns
	// 0 if the key existed. When it set the key and ARGV[3] is given (a
	// leader's grant), it publishes "granted" on the channel ARGV[3]
	// (LeaderChannel).
	ScriptAcquireFenced

	// ScriptRaiseFence raises each counter in KEYS (one or more) to
	// ARGV[1] where it is lower (a missing counter counts as 0), and
	// returns 1.
	ScriptRaiseFence

	// ScriptEnqueue appends the waiter ticket ARGV[1] to the wait queue
	// KEYS[2] of the lock KEYS[1], and sets the queue to expire after
	// ARGV[2] milliseconds, returning 1; but when ARGV[3] is not "force"
	// and the lock is free, it does nothing and returns 0: the waiter
	// should try again at once rather than wait for a release that
	// already happened. Keys after the queue are more keys of the lock
	// (a semaphore's other permit slots, PermitKey): the lock is free
	// when any one of KEYS[1] and them is missing.
	ScriptEnqueue

	// ScriptDequeue removes the waiter ticket ARGV[1] from the wait queue
	// KEYS[1] and returns how many entries it removed.
	ScriptDequeue

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
	// its new value, as ScriptAcquireFenced does, and publishes on the
	// channel ARGV[4] when given, as ScriptAcquireFenced does on ARGV[3].
	ScriptAcquireGuarded

	// ScriptAdopt sets the birth key KEYS[1] to 0, which marks the node
	// adopted: old to the restart guard at once. It returns 1; see
	// Locker.Adopt.
	ScriptAdopt

	// ScriptIdentify reads the server's identity from KEYS[1] (IdentityKey)
	// in database 0, whatever database the connection selected, and returns
	// it; when the key is missing, it first sets it to ARGV[1], a fresh
	// random value, with no expiry. Core runs it before a node's first yes
	// counts and again after a failure, so that one server reached under
	// two names, or through two databases, votes once (see New). The
	// script's SELECT changes only the script's own database, not the
	// connection's; a Redis Cluster has database 0 only.
	ScriptIdentify

	// ScriptInspect reads KEYS[1] without changing it: {pttl, value} while
	// it exists (pttl is -1 for a key without expiry), {-2} when it does
	// not. When the key holds SharedValue and its readers set KEYS[2]
	// (ReadersKey) is given, each live reader follows, as its value and its
	// remaining TTL in milliseconds, soonest to expire first: {pttl,
	// SharedValue, r1, ttl1, r2, ttl2, ...}. Locker.Inspect runs it; it
	// takes no lock and writes nothing (expired readers are skipped, not
	// trimmed).
	ScriptInspect

	// ScriptAcquireAll grants every one of n lock keys or none of them.
	// KEYS: the n keys (in the caller's canonical order), then, when
	// fenced, their n fencing counters in the same order, then, when
	// marked, their n WriterKeys, then, when guarded, the birth key.
	// ARGV[1] the value, ARGV[2] the TTL in milliseconds, ARGV[3] n,
	// ARGV[4] "1" fenced or "0", ARGV[5] the restart guard's minimum age
	// in milliseconds, or "" unguarded, and optionally ARGV[6] the
	// acquisition's own SetMark (marked; "" is unmarked). Guarded, it checks the node's
	// age as ScriptAcquireGuarded does and answers -1 - age from a node
	// too young. When any of the keys exists, or, marked, any WriterKey
	// holds another set's mark that sorts before its own (an older set
	// waits), it answers 0 and writes nothing. Otherwise it sets every key
	// to the value with the TTL, deletes its own marks, and answers 1;
	// fenced, it takes t = 1 + the largest of the counters, sets every
	// counter to t, and answers t.
	ScriptAcquireAll

	// ScriptExtendAll sets the expiry of every key in KEYS to ARGV[2]
	// milliseconds and answers 1 if every one holds ARGV[1]; otherwise it
	// changes nothing and answers 0.
	ScriptExtendAll

	// ScriptReleaseAll deletes each of the n = ARGV[2] keys at the head of
	// KEYS that holds ARGV[1], and answers 0 if none did. Given the
	// channel root ARGV[3] (ReleaseChannel("")), the n keys' wait queues
	// follow the keys, and each key it deleted is handed to the oldest
	// ticket of its own queue as ScriptRelease does, on the channel root
	// followed by the key; it answers 2 when any ticket was published,
	// else 1. Given a SetMark ARGV[5] (a lost round's withdrawal) and its
	// expiry ARGV[4] in milliseconds, the n keys' WriterKeys come last and
	// it marks each, held or free, unless it holds an older set's mark or
	// anything but a mark (a writer's "1" is replaced: a set's mark keeps
	// readers out too).
	ScriptReleaseAll

	// ScriptAcquireShared grants a read lock. KEYS[1] the lock key,
	// KEYS[2] its ReadersKey, KEYS[3] its WriterKey, then the fencing
	// counter when fenced, then the birth key when guarded. ARGV[1] the
	// reader's value, ARGV[2] the TTL in milliseconds, ARGV[3] "1" fenced
	// or "0", ARGV[4] the guard's minimum age in milliseconds, or "", and
	// optionally ARGV[5] "1" when the reader was handed the key (its ticket
	// was popped: it was queued before the waiting writer). Guarded, a
	// node too young answers -1 - age. It trims the expired readers; it
	// answers 0 when the key holds anything but SharedValue (a writer
	// holds it) or, unless handed the key, the writer mark holds "1" (a
	// writer waits) or a SetMark (a set waits).
	// Otherwise it adds the reader, expiring at the server's TIME plus the
	// TTL, sets the key to SharedValue, makes the key and the set expire
	// with their last reader, and answers 1, or, fenced, the counter
	// incremented.
	ScriptAcquireShared

	// ScriptExtendShared renews the reader ARGV[1] of KEYS[1] (readers set
	// KEYS[2]) to expire ARGV[2] milliseconds from the server's TIME, and
	// makes the key and the set expire with their last reader; it answers
	// 1, or 0 when the key does not hold SharedValue or the reader is not
	// (or no longer) in the set.
	ScriptExtendShared

	// ScriptReleaseShared removes the reader ARGV[1] from the readers set
	// KEYS[2] of KEYS[1] and answers 0 if it was not there (live). While
	// other readers remain, the key and the set expire with the last of
	// them and it answers 1. When it was the last, it deletes the set and,
	// if it holds SharedValue, the key; then, given the key's wait queue
	// KEYS[3] and the channel prefix ARGV[2], it hands the lock over as
	// ScriptRelease does and answers 2, or answers 1.
	ScriptReleaseShared

	// ScriptWithdraw undoes the grant of a mutex round that lost. KEYS[1]
	// the key, KEYS[2] its WriterKey, optionally KEYS[3] its wait queue;
	// ARGV[1] the value, ARGV[2] the writer mark's expiry in milliseconds,
	// ARGV[3] the channel prefix (with the queue only). When the key holds
	// the value it does what ScriptRelease does (delete, hand over, 1 or
	// 2). When it holds SharedValue it sets the writer mark for ARGV[2]
	// milliseconds, so that no new reader is granted while the writer
	// waits, and answers 0. Otherwise it answers 0.
	ScriptWithdraw

	// ScriptEnqueueAll is ScriptEnqueue for a multi-key lock. KEYS: its n
	// keys, then their n wait queues; ARGV[1] the ticket, ARGV[2] the
	// queue's expiry in milliseconds, ARGV[3] "force" or "", ARGV[4] the
	// preferred index p (1 to n). It appends the ticket to the queue of
	// key p if that key exists, else of the first key that exists, sets
	// that queue's expiry, and answers the key's index; when no key exists
	// it queues nothing and answers 0, unless forced: then it queues on
	// key p and answers p.
	ScriptEnqueueAll

	// ScriptLeader reads a leader's key KEYS[1] and its fencing counter
	// KEYS[2] without changing them: {value, counter} while the key
	// exists (counter 0 when missing), {} when it does not.
	// Locker.Leader and Locker.Observe run it.
	ScriptLeader

	scriptCount = iota
)

type scriptText struct{ name, source, sha string }

var scriptTexts = func() [scriptCount]scriptText {
	t := [scriptCount]scriptText{
		ScriptRelease: {name: "release", source: luaHandOff + `if redis.call("get", KEYS[1]) ~= ARGV[1] then
	return 0
end
redis.call("del", KEYS[1])
if ARGV[3] then
	redis.call("publish", ARGV[3], "released")
end
return handoff(KEYS[2], ARGV[2])`},
		ScriptExtend: {name: "extend", source: `if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("pexpire", KEYS[1], ARGV[2])
end
return 0`},
		ScriptAcquireFenced: {name: "acquire-fenced", source: `if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	local c = redis.call("incr", KEYS[2])
	if ARGV[3] then
		redis.call("publish", ARGV[3], "granted")
	end
	return c
end
return 0`},
		ScriptRaiseFence: {name: "raise-fence", source: `local t = tonumber(ARGV[1])
for i = 1, #KEYS do
	if (tonumber(redis.call("get", KEYS[i])) or 0) < t then
		redis.call("set", KEYS[i], ARGV[1])
	end
end
return 1`},
		ScriptEnqueue: {name: "enqueue", source: `if ARGV[3] ~= "force" then
	for i = 1, #KEYS do
		if i ~= 2 and redis.call("exists", KEYS[i]) == 0 then
			return 0
		end
	end
end
redis.call("rpush", KEYS[2], ARGV[1])
redis.call("pexpire", KEYS[2], ARGV[2])
return 1`},
		ScriptDequeue: {name: "dequeue", source: `return redis.call("lrem", KEYS[1], 0, ARGV[1])`},
		ScriptAcquireGuarded: {name: "acquire-guarded", source: `local t = redis.call("time")
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
if ARGV[4] then
	redis.call("publish", ARGV[4], "granted")
end
if KEYS[3] then
	return redis.call("incr", KEYS[3])
end
return 1`},
		ScriptAdopt: {name: "adopt", source: `redis.call("set", KEYS[1], "0")
return 1`},
		ScriptIdentify: {name: "identify", source: `redis.call("select", 0)
local id = redis.call("get", KEYS[1])
if not id then
	id = ARGV[1]
	redis.call("set", KEYS[1], id)
end
return id`},
		ScriptInspect: {name: "inspect", source: luaShared + luaNow + `local v = redis.call("get", KEYS[1])
if not v then
	return {-2}
end
local out = {redis.call("pttl", KEYS[1]), v}
if KEYS[2] and v == shared then
	local t = now()
	local r = redis.call("zrangebyscore", KEYS[2], "(" .. string.format("%d", t), "+inf", "WITHSCORES")
	for i = 1, #r, 2 do
		out[#out + 1] = r[i]
		out[#out + 1] = tonumber(r[i + 1]) - t
	end
end
return out`},
		ScriptAcquireAll:    {name: "acquire-all", source: luaInt + luaNow + luaAge + luaSetMark + luaAcquireAll},
		ScriptExtendAll:     {name: "extend-all", source: luaInt + luaExtendAll},
		ScriptReleaseAll:    {name: "release-all", source: luaInt + luaHandOff + luaSetMark + luaReleaseAll},
		ScriptAcquireShared: {name: "acquire-shared", source: luaInt + luaNow + luaAge + luaShared + luaStretch + luaSetMark + luaAcquireShared},
		ScriptExtendShared:  {name: "extend-shared", source: luaInt + luaNow + luaShared + luaStretch + luaExtendShared},
		ScriptReleaseShared: {name: "release-shared", source: luaNow + luaShared + luaStretch + luaHandOff + luaReleaseShared},
		ScriptWithdraw:      {name: "withdraw", source: luaInt + luaShared + luaHandOff + luaWithdraw},
		ScriptEnqueueAll:    {name: "enqueue-all", source: luaInt + luaEnqueueAll},
		ScriptLeader: {name: "leader", source: `local v = redis.call("get", KEYS[1])
if not v then
	return {}
end
return {v, tonumber(redis.call("get", KEYS[2])) or 0}`},
	}
	for i := range t {
		sum := sha1.Sum([]byte(t[i].source))
		t[i].sha = hex.EncodeToString(sum[:])
	}
	return t
}()

// Name is the script's short name, such as "release".
func (s Script) Name() string {
	if s >= scriptCount {
		return "script(" + strconv.Itoa(int(s)) + ")"
	}
	return scriptTexts[s].name
}

// Source is the Lua text, as sent with EVAL; "" for an unknown Script.
func (s Script) Source() string {
	if s >= scriptCount {
		return ""
	}
	return scriptTexts[s].source
}

// SHA is the hex SHA1 of Source, as sent with EVALSHA; "" for an unknown
// Script.
func (s Script) SHA() string {
	if s >= scriptCount {
		return ""
	}
	return scriptTexts[s].sha
}

// String returns the script's name.
func (s Script) String() string { return s.Name() }

// Scripts returns every script of the protocol, in a new slice.
func Scripts() []Script {
	all := make([]Script, scriptCount)
	for i := range all {
		all[i] = Script(i)
	}
	return all
}

// IsAcquisition reports whether a script, given by SHA (EVALSHA) or by
// source (EVAL), is one of the protocol's acquisitions (fenced or
// restart-guarded, multi-key or shared), for nodes that count acquisition
// attempts.
func IsAcquisition(sha, source string) bool {
	for _, s := range [...]Script{ScriptAcquireGuarded, ScriptAcquireFenced, ScriptAcquireAll, ScriptAcquireShared} {
		if sha == s.SHA() || source == s.Source() {
			return true
		}
	}
	return false
}

// ScriptBySHA returns the protocol's script whose SHA is sha, if any.
func ScriptBySHA(sha string) (Script, bool) {
	for i := range Script(scriptCount) {
		if scriptTexts[i].sha == sha {
			return i, true
		}
	}
	return 0, false
}

// The keys and channels the scripts touch, beside the lock keys.

// ValueBytes is the number of random bytes in a lock value.
const ValueBytes = 20

// BirthKey is the key in which each node that the restart guard watches
// keeps its birth time: when its data began, in milliseconds since the
// Unix epoch of the server's clock. The first guarded acquisition writes
// it as the time the server process started (or "0" for a node adopted
// with Locker.Adopt). It never expires. It is the same for every Locker,
// whatever its key prefix, since it describes the server, not the locks;
// ACLs must let the lock user read and write it (and call INFO). It lives
// in the node's own database, beside the lock keys it guards; written from
// the server's start, it has the same value in every database until one
// is adopted. Operators can adopt a node by hand with redis-cli SET
// quorumlock:birth 0 (with -n for a database other than 0).
const BirthKey = "quorumlock:birth"

// IdentityKey is the key in which each server keeps the identity core
// knows it by: a random value that ScriptIdentify writes the first time
// any Locker asks, and that never expires. It lives in database 0,
// whatever database a node selects, since it describes the server, not a
// database: one server reached through two databases is one identity.
// Like BirthKey it is the same for every Locker, whatever its key prefix;
// ACLs must let the lock user read and write it and run SELECT. Two nodes
// of one Locker that report the same identity are one server, which votes
// once. A server restarted without persistence forgets it and gets a new
// one.
const IdentityKey = "quorumlock:node"

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

// LeaderChannel is the pub/sub channel on which a leader's grant and
// release (Locker.Campaign) announce a change of key's leader (the stored
// key): Locker.Observe listens on it and reads the leader again.
func LeaderChannel(key string) string { return "quorumlock:leader:" + key }

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

// ReaderTicket reports whether ticket, a waiter's ticket in a wait queue
// ("owner.seq"), is a shared waiter's: its seq begins with "R" (other tickets'
// seqs are lower-case base 36). A release
// that hands the lock to one hands it to every shared waiter queued right
// behind it too, since they hold the key together.
func ReaderTicket(ticket string) bool {
	_, seq, ok := strings.Cut(ticket, ".")
	return ok && strings.HasPrefix(seq, "R")
}

// QueueSuffix ends the name of a key's wait queue; see QueueKey.
const QueueSuffix = ":queue"

// QueueKey returns the name of the wait queue of key (the stored key): a
// Redis list of waiter tickets on the herald node, in key's cluster slot,
// named as FenceKey names the counter but with QueueSuffix. ok is false
// when no such name exists (a key with no hash tag that contains "}"):
// waiters for such a key are not handed the lock and poll with the retry
// delay.
func QueueKey(key string) (queue string, ok bool) { return sideKey(key, QueueSuffix) }

// SharedValue is the value a read lock's key holds while readers hold it;
// each reader's own random value lives in the key's readers set
// (ReadersKey). It is never a lock value (those are 27 base64url
// characters), so no mutex release or extension matches it, and a plain
// SET NX, from any Redlock client, is refused while readers hold the key.
const SharedValue = "quorumlock:shared"

// ReadersSuffix ends the name of a key's readers set; see ReadersKey.
const ReadersSuffix = ":readers"

// ReadersKey returns the name of the readers set of key (the stored key):
// a Redis sorted set whose members are the values of the key's readers,
// each scored by its expiry in Unix milliseconds of the server's TIME;
// every shared script first trims the members whose expiry has passed. It
// lives in key's cluster slot, named as FenceKey names the counter but
// with ReadersSuffix; ok is false when no such name exists (a key with no
// hash tag that contains "}"), and core then refuses the key for read
// locks.
func ReadersKey(key string) (readers string, ok bool) { return sideKey(key, ReadersSuffix) }

// WriterSuffix ends the name of a key's writer mark; see WriterKey.
const WriterSuffix = ":writer"

// WriterKey returns the name of the writer mark of key (the stored key):
// while it holds "1", a writer waits for the key's readers, and while it
// holds a SetMark, a multi-key lock waits for the key; either way no new
// reader is granted (ScriptWithdraw and ScriptReleaseAll set it, with an
// expiry). It lives in key's
// cluster slot, named as FenceKey names the counter but with
// WriterSuffix; ok is false when no such name exists (a key with no hash
// tag that contains "}"), and core then refuses the key for read locks.
func WriterKey(key string) (mark string, ok bool) { return sideKey(key, WriterSuffix) }

// SetMarkPrefix begins every SetMark.
const SetMarkPrefix = "quorumlock:set:"

// SetMark returns the priority mark of a waiting multi-key lock, which
// ScriptReleaseAll writes at each of its keys' WriterKey after a lost
// round: SetMarkPrefix, prio as 15 decimal digits (when the acquisition
// first waited, in Unix milliseconds of its Locker's clock, clamped to
// 0..SetMarkFresh), a colon and id (names the acquisition). Marks sort
// byte by byte: the older set first, ties by id. A set that never waited
// sends prio SetMarkFresh, after every waiting set.
func SetMark(prio int64, id string) string {
	p := strconv.FormatInt(min(max(prio, 0), SetMarkFresh), 10)
	return SetMarkPrefix + strings.Repeat("0", 15-len(p)) + p + ":" + id
}

// SetMarkFresh is the prio of a set that has not waited, or not yet for
// long (see SetMark): its mark keeps new readers out, as a writer's does,
// and holds back no set.
const SetMarkFresh = 999_999_999_999_999

// freshPrio is SetMarkFresh as SetMark writes it.
const freshPrio = "999999999999999"

// PermitSuffix begins the name of a semaphore's permit slot; see PermitKey.
const PermitSuffix = ":permit:"

// PermitKey returns the name of permit slot i (0 to K-1) of the semaphore
// key (the stored key): an ordinary lock key, held by one permit's holder,
// in key's cluster slot, named as FenceKey names the counter but with
// PermitSuffix and i ("{jobs}:permit:3" for "jobs"). ok is false when no
// such name exists (a key with no hash tag that contains "}"), and core
// then refuses the key for semaphores.
func PermitKey(key string, i int) (slot string, ok bool) {
	return sideKey(key, PermitSuffix+strconv.Itoa(i))
}

// SemaphoreSuffix ends the name of a semaphore's own keys; see
// SemaphoreKey.
const SemaphoreSuffix = ":permits"

// SemaphoreKey returns the name from which the semaphore key (the stored
// key) names its wait queue (QueueKey), release notices (ReleaseChannel)
// and fencing counter (FenceKey): "{jobs}:permits" for "jobs", so that
// they are not those of a lock of another kind on the same key. ok is as
// PermitKey's.
func SemaphoreKey(key string) (name string, ok bool) { return sideKey(key, SemaphoreSuffix) }

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
