package memory

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// scriptImpl is how a node carries out one protocol script: the numbers of
// keys and arguments the script takes, and the function that runs it once
// they are checked.
type scriptImpl struct {
	keys, args span
	run        func(n *Node, c *scriptCall) (any, error)
}

// scriptCall is one run of a script: its keys and arguments, the node's
// time, and the notices it publishes, which the caller delivers once n.mu
// is unlocked.
type scriptCall struct {
	keys, args []string
	now        time.Time
	notify     []func()
}

// span is a count from lo to hi, both included.
type span struct{ lo, hi int }

func (s span) has(n int) bool { return s.lo <= n && n <= s.hi }

// count writes the span with noun: "no keys", "1 key", "2 or 3 keys",
// "3 to 5 keys", "1 or more keys".
func (s span) count(noun string) string {
	switch {
	case s.hi == many:
		return fmt.Sprintf("%d or more %ss", s.lo, noun)
	case s.hi > s.lo+1:
		return fmt.Sprintf("%d to %d %ss", s.lo, s.hi, noun)
	case s.lo != s.hi:
		return fmt.Sprintf("%d or %d %ss", s.lo, s.hi, noun)
	case s.lo == 0:
		return "no " + noun + "s"
	case s.lo == 1:
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", s.lo, noun)
}

// scriptImpls holds the node's implementation of each protocol script.
var scriptImpls = map[driver.Script]scriptImpl{
	driver.ScriptRelease:        {span{1, 2}, span{1, 3}, (*Node).release},
	driver.ScriptEnqueue:        {span{2, many}, span{3, 3}, (*Node).enqueue},
	driver.ScriptDequeue:        {span{1, 1}, span{1, 1}, (*Node).dequeue},
	driver.ScriptExtend:         {span{1, 1}, span{2, 2}, (*Node).extend},
	driver.ScriptAcquireFenced:  {span{2, 2}, span{2, 3}, (*Node).acquireFenced},
	driver.ScriptAcquireGuarded: {span{2, 3}, span{3, 4}, (*Node).acquireGuarded},
	driver.ScriptAdopt:          {span{1, 1}, span{0, 0}, (*Node).adopt},
	driver.ScriptIdentify:       {span{1, 1}, span{1, 1}, (*Node).identify},
	driver.ScriptInspect:        {span{1, 2}, span{0, 0}, (*Node).inspect},
	driver.ScriptRaiseFence:     {span{1, many}, span{1, 1}, (*Node).raiseFence},
	driver.ScriptAcquireAll:     {span{1, many}, span{5, 6}, (*Node).acquireAll},
	driver.ScriptExtendAll:      {span{1, many}, span{2, 2}, (*Node).extendAll},
	driver.ScriptReleaseAll:     {span{1, many}, span{2, 5}, (*Node).releaseAll},
	driver.ScriptAcquireShared:  {span{3, 5}, span{4, 5}, (*Node).acquireShared},
	driver.ScriptExtendShared:   {span{2, 2}, span{2, 2}, (*Node).extendShared},
	driver.ScriptReleaseShared:  {span{2, 3}, span{1, 2}, (*Node).releaseShared},
	driver.ScriptWithdraw:       {span{2, 3}, span{2, 3}, (*Node).withdraw},
	driver.ScriptEnqueueAll:     {span{2, many}, span{4, 4}, (*Node).enqueueAll},
	driver.ScriptLeader:         {span{2, 2}, span{0, 0}, (*Node).leader},
}

// many is the upper end of a span with no limit.
const many = math.MaxInt32

// run carries out a protocol script; n.mu is held. It returns the notify
// functions of the watchers a release published to, for the caller to call
// once n.mu is unlocked. A script that fails answers with its error alone;
// one that was carried out answers with n.reply's error.
func (n *Node) run(sha string, keys, args []string) (any, []func(), error) {
	s, ok := driver.ScriptBySHA(sha)
	if !ok {
		return nil, nil, fmt.Errorf("memory: script %s is not one of the lock protocol's", sha)
	}
	impl, ok := scriptImpls[s]
	if !ok {
		return nil, nil, fmt.Errorf("memory: script %q has no implementation", s.Name())
	}
	if !impl.keys.has(len(keys)) || !impl.args.has(len(args)) {
		return nil, nil, fmt.Errorf("ERR %s script takes %s and %s", s.Name(), impl.keys.count("key"), impl.args.count("argument"))
	}
	c := &scriptCall{keys: keys, args: args, now: n.clock.Now()}
	reply, err := impl.run(n, c)
	if err != nil {
		return nil, nil, err
	}
	return reply, c.notify, n.reply()
}

// release is driver.ScriptRelease: it deletes the lock if it holds the
// value and, given a wait queue and a channel prefix, hands the lock to the
// waiter at the queue's head by publishing its ticket; given a leader's
// channel (the third argument), it first publishes "released" there.
func (n *Node) release(c *scriptCall) (any, error) {
	if e, ok := n.data[c.keys[0]]; !ok || !e.live(c.now) || e.value != c.args[0] {
		return int64(0), nil
	}
	delete(n.data, c.keys[0])
	if len(c.args) == 3 {
		c.notify = append(c.notify, n.publish(c.args[2], "released")...)
	}
	return n.handOff(c, c.keys[1:], c.args[1:min(len(c.args), 2)]), nil
}

// announce publishes a leader's grant on the channel given as argument i,
// if any, once the script set the key (answer > 0).
func (n *Node) announce(c *scriptCall, i int, answer int64) {
	if answer > 0 && len(c.args) > i {
		c.notify = append(c.notify, n.publish(c.args[i], "granted")...)
	}
}

// errWrongType is Redis's error for a command on a key of another type.
var errWrongType = errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")

// leader is driver.ScriptLeader: {value, counter} of a live key, the
// counter 0 when missing or not an integer (Lua's tonumber), {} when the
// key does not exist, and Redis's WRONGTYPE error for a list.
func (n *Node) leader(c *scriptCall) (any, error) {
	e, ok := n.data[c.keys[0]]
	switch {
	case !ok || !e.live(c.now):
		return []any{}, nil
	case e.list != nil:
		return nil, errWrongType
	}
	counter, err := n.counter(c.keys[1], c.now)
	if err != nil {
		counter = 0
	}
	return []any{e.value, counter}, nil
}

// handOff ends a release that deleted the lock: given a wait queue (the
// first of queue) and a channel prefix (the first of prefix), it pops the
// oldest ticket and publishes it on its owner's channel, answering 2;
// otherwise it answers 1. n.mu is held.
func (n *Node) handOff(c *scriptCall, queue, prefix []string) int64 {
	if len(queue) == 0 || len(prefix) == 0 {
		return 1
	}
	ticket, ok := n.pop(queue[0], c.now)
	if !ok {
		return 1
	}
	for {
		owner, _, _ := strings.Cut(ticket, ".")
		c.notify = append(c.notify, n.publish(prefix[0]+":"+owner, ticket)...)
		if !driver.ReaderTicket(ticket) {
			return 2
		}
		if next, ok := n.head(queue[0], c.now); !ok || !driver.ReaderTicket(next) {
			return 2
		}
		ticket, _ = n.pop(queue[0], c.now)
	}
}

// enqueue is driver.ScriptEnqueue: it appends a ticket to the lock's wait
// queue and sets the queue's expiry, unless the lock is free (any of its
// keys missing: the keys after the queue are a semaphore's other slots)
// and the call is not forced.
func (n *Node) enqueue(c *scriptCall) (any, error) {
	ttl, err := expireTime(c.args[1])
	if err != nil {
		return nil, err
	}
	for i, k := range c.keys {
		if e, ok := n.data[k]; i != 1 && c.args[2] != "force" && (!ok || !e.live(c.now)) {
			return int64(0), nil
		}
	}
	q := n.data[c.keys[1]]
	if !q.live(c.now) {
		q = entry{}
	}
	q.list = append(q.list, c.args[0])
	q.expires = c.now.Add(ttl)
	n.data[c.keys[1]] = q
	return int64(1), nil
}

// dequeue is driver.ScriptDequeue: it removes every copy of a ticket from a
// wait queue and answers how many it removed.
func (n *Node) dequeue(c *scriptCall) (any, error) {
	q, ok := n.data[c.keys[0]]
	if !ok || !q.live(c.now) {
		return int64(0), nil
	}
	kept := q.list[:0]
	for _, t := range q.list {
		if t != c.args[0] {
			kept = append(kept, t)
		}
	}
	removed := int64(len(q.list) - len(kept))
	n.setList(c.keys[0], q, kept)
	return removed, nil
}

// extend is driver.ScriptExtend: it sets the lock's expiry if it holds the
// value.
func (n *Node) extend(c *scriptCall) (any, error) {
	ttl, err := expireTime(c.args[1])
	if err != nil {
		return nil, err
	}
	e, ok := n.data[c.keys[0]]
	if !ok || !e.live(c.now) || e.value != c.args[0] {
		return int64(0), nil
	}
	e.expires = c.now.Add(ttl)
	n.data[c.keys[0]] = e
	return int64(1), nil
}

// acquireFenced is driver.ScriptAcquireFenced: SET NX PX, then the fencing
// counter incremented.
func (n *Node) acquireFenced(c *scriptCall) (any, error) {
	ttl, err := expireTime(c.args[1])
	if err != nil {
		return nil, err
	}
	answer, err := n.setNX(c.keys[0], c.args[0], ttl, c.keys[1], c.now)
	if err != nil {
		return nil, err
	}
	n.announce(c, 2, answer)
	return answer, nil
}

// acquireGuarded is driver.ScriptAcquireGuarded: a node younger than the
// minimum age answers -1 - age and sets nothing; an older one acquires as
// SET NX PX does, with the fencing counter when given.
func (n *Node) acquireGuarded(c *scriptCall) (any, error) {
	ttl, err := expireTime(c.args[1])
	if err != nil {
		return nil, err
	}
	minAge, err := strconv.ParseInt(c.args[2], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("ERR acquire-guarded: %q is not an integer", c.args[2])
	}
	born := n.born(c.keys[1], c.now)
	if age := max(c.now.UnixMilli()-born, 0); born != 0 && age < minAge { // 0: adopted
		return -1 - age, nil
	}
	fence := ""
	if len(c.keys) == 3 {
		fence = c.keys[2]
	}
	answer, err := n.setNX(c.keys[0], c.args[0], ttl, fence, c.now)
	if err != nil {
		return nil, err
	}
	n.announce(c, 3, answer)
	return answer, nil
}

// born reads the birth key: when the node's data began, in Unix
// milliseconds, or 0 once adopted. A missing key, or one that holds no
// number, is first set to when the node started (never later than now).
func (n *Node) born(key string, now time.Time) int64 {
	born, err := n.counter(key, now)
	if _, ok := n.data[key]; !ok || err != nil {
		born = min(n.started.UnixMilli(), now.UnixMilli())
		n.data[key] = entry{value: strconv.FormatInt(born, 10)}
	}
	return born
}

// adopt is driver.ScriptAdopt: the birth key set to 0.
func (n *Node) adopt(c *scriptCall) (any, error) {
	n.data[c.keys[0]] = entry{value: "0"}
	return int64(1), nil
}

// identify is driver.ScriptIdentify: the node's identity, first set to the
// fresh value given when missing.
func (n *Node) identify(c *scriptCall) (any, error) {
	e, ok := n.data[c.keys[0]]
	if !ok || !e.live(c.now) {
		e = entry{value: c.args[0]}
		n.data[c.keys[0]] = e
	}
	return e.value, nil
}

// inspect is driver.ScriptInspect: {pttl, value} of a live key, pttl -1
// without expiry, or {-2} when it does not exist; a key that holds
// driver.SharedValue, given its readers set, is followed by each live
// reader and its TTL, soonest to expire first. It writes nothing.
func (n *Node) inspect(c *scriptCall) (any, error) {
	e, ok := n.data[c.keys[0]]
	var out []any
	switch {
	case !ok || !e.live(c.now):
		return []any{int64(-2)}, nil
	case e.expires.IsZero():
		out = []any{int64(-1), e.value}
	default:
		out = []any{e.expires.Sub(c.now).Milliseconds(), e.value}
	}
	if len(c.keys) == 2 && e.value == driver.SharedValue {
		for _, r := range n.liveReaders(c.keys[1], c.now) {
			out = append(out, r.member, r.expiry-c.now.UnixMilli())
		}
	}
	return out, nil
}

// raiseFence is driver.ScriptRaiseFence: each counter raised to the
// target where it is lower.
func (n *Node) raiseFence(c *scriptCall) (any, error) {
	target, err := strconv.ParseInt(c.args[0], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("ERR raise-fence: %q is not an integer", c.args[0])
	}
	for _, k := range c.keys {
		counter, err := n.counter(k, c.now)
		if err != nil {
			return nil, err
		}
		if counter < target {
			n.data[k] = entry{value: c.args[0]}
		}
	}
	return int64(1), nil
}

// setNX sets key to value for ttl unless it is live, as SET NX PX does,
// and answers 0 when it was, else 1 or, with a fencing counter, the
// counter incremented; n.mu is held.
func (n *Node) setNX(key, value string, ttl time.Duration, counter string, now time.Time) (int64, error) {
	if e, ok := n.data[key]; ok && e.live(now) {
		return 0, nil
	}
	var c int64
	if counter != "" {
		var err error
		if c, err = n.counter(counter, now); err != nil {
			return 0, err
		}
		n.data[counter] = entry{value: strconv.FormatInt(c+1, 10)}
	}
	n.data[key] = entry{value: value, expires: now.Add(ttl)}
	return c + 1, nil
}

// head returns the oldest item of the list at key; n.mu is held.
func (n *Node) head(key string, now time.Time) (string, bool) {
	q, ok := n.data[key]
	if !ok || !q.live(now) || len(q.list) == 0 {
		return "", false
	}
	return q.list[0], true
}

// pop takes the oldest item of the list at key; n.mu is held.
func (n *Node) pop(key string, now time.Time) (string, bool) {
	q, ok := n.data[key]
	if !ok || !q.live(now) || len(q.list) == 0 {
		return "", false
	}
	item := q.list[0]
	n.setList(key, q, q.list[1:])
	return item, true
}

// setList stores q with items, deleting it when empty, as Redis deletes
// an empty list; n.mu is held.
func (n *Node) setList(key string, q entry, items []string) {
	if len(items) == 0 {
		delete(n.data, key)
		return
	}
	q.list = items
	n.data[key] = q
}

// expireTime reads a script's expiry argument: positive milliseconds.
func expireTime(arg string) (time.Duration, error) {
	ms, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || ms <= 0 {
		return 0, fmt.Errorf("ERR invalid expire time %q", arg)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// counter reads an integer key, 0 when missing; n.mu is held.
func (n *Node) counter(key string, now time.Time) (int64, error) {
	e, ok := n.data[key]
	if !ok || !e.live(now) {
		return 0, nil
	}
	v, err := strconv.ParseInt(e.value, 10, 64)
	if err != nil {
		return 0, errors.New("ERR value is not an integer or out of range")
	}
	return v, nil
}
