package driver

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
