package memory

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// The scripts of multi-key and shared (read) locks. Each checks its
// arguments before it writes, and answers with the errors the Lua
// scripts give, naming the script.

// readers is a sorted set of a key's readers: each member's expiry, in
// Unix milliseconds of the node's clock.
type readers map[string]int64

// reader is one member of a readers set.
type reader struct {
	member string
	expiry int64
}

// acquireAll is driver.ScriptAcquireAll: every key set, or none.
func (n *Node) acquireAll(c *scriptCall) (any, error) {
	const name = "acquire-all"
	ttl, err := scriptInt(name, "TTL", c.args[1], 1)
	if err != nil {
		return nil, err
	}
	own := optArg(c.args, 5)
	if own != "" && !setMark(own) {
		return nil, fmt.Errorf("ERR %s: invalid mark %s", name, own)
	}
	keys, fenced, guarded := layoutAll(c, own != "")
	if keys == 0 {
		return nil, fmt.Errorf("ERR %s: %d keys do not match n %s, fenced %s, guard %s, mark %s", name, len(c.keys), c.args[2], c.args[3], c.args[4], optArg(c.args, 5))
	}
	if guarded {
		if young, err := n.young(name, c, c.args[4]); young < 0 || err != nil {
			return young, err
		}
	}
	for _, k := range c.keys[:keys] {
		if _, ok := n.live(k, c.now); ok {
			return int64(0), nil
		}
	}
	var marks []string
	if own != "" {
		m0 := keys * (1 + btoi(fenced))
		marks = c.keys[m0 : m0+keys]
	}
	for _, k := range marks {
		if m, ok := n.live(k, c.now); ok && setMark(m.value) && m.value != own && !freshMark(m.value) && m.value < own {
			return int64(0), nil // a set that has waited longer waits for this key
		}
	}
	t := int64(1)
	if fenced {
		for _, k := range c.keys[keys : 2*keys] {
			v, err := n.counter(k, c.now)
			if err != nil {
				return nil, fmt.Errorf("ERR %s: fencing counter %s is not an integer", name, k)
			}
			t = max(t, v+1)
		}
	}
	for i, k := range c.keys[:keys] {
		n.data[k] = entry{value: c.args[0], expires: c.now.Add(time.Duration(ttl) * time.Millisecond)}
		if fenced {
			n.data[c.keys[keys+i]] = entry{value: strconv.FormatInt(t, 10)}
		}
		if marks != nil {
			if m, ok := n.live(marks[i], c.now); ok && sameSet(m.value, own) {
				delete(n.data, marks[i])
			}
		}
	}
	return t, nil
}

// setMark reports whether v is a waiting set's mark (driver.SetMark).
func setMark(v string) bool { return strings.HasPrefix(v, driver.SetMarkPrefix) }

// freshPrefix begins a set's mark without priority (driver.SetMarkFresh).
var freshPrefix = driver.SetMark(driver.SetMarkFresh, "")

// sameSet reports whether v is a mark of the acquisition whose mark is
// own: the same id, whatever its priority.
func sameSet(v, own string) bool {
	at := len(driver.SetMarkPrefix) + 16 // past the priority and its colon
	return setMark(v) && len(v) > at && len(own) > at && v[at:] == own[at:]
}

// freshMark reports whether v is a set's mark without priority: it keeps
// new readers out and holds back no set.
func freshMark(v string) bool { return strings.HasPrefix(v, freshPrefix) }

// mark writes the set's own mark at key for px milliseconds, unless an
// older set's mark, or a key that is no mark, is there; n.mu is held.
func (n *Node) mark(key, own string, px int64, now time.Time) {
	if m, ok := n.live(key, now); ok && m.value != "1" && m.value != own && (!setMark(m.value) || m.value < own) {
		return
	}
	n.data[key] = entry{value: own, expires: now.Add(time.Duration(px) * time.Millisecond)}
}

// optArg returns args[i], or "" when there are fewer arguments.
func optArg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

// layoutAll reads ScriptAcquireAll's layout: how many lock keys, whether
// fenced and guarded (marked is given); 0 keys when the arguments do not
// match KEYS.
func layoutAll(c *scriptCall, marked bool) (keys int, fenced, guarded bool) {
	keys, err := strconv.Atoi(c.args[2])
	fenced, guarded = c.args[3] == "1", c.args[4] != ""
	want := keys * (1 + btoi(fenced) + btoi(marked))
	if guarded {
		want++
	}
	if err != nil || keys < 1 || !fenced && c.args[3] != "0" || len(c.keys) != want {
		return 0, false, false
	}
	return keys, fenced, guarded
}

// young is the restart guard's check on the birth key, the last of
// c.keys: -1 - age from a node younger than minAge, else 0.
func (n *Node) young(name string, c *scriptCall, minAge string) (int64, error) {
	least, err := scriptInt(name, "minimum age", minAge, math.MinInt64)
	if err != nil {
		return 0, err
	}
	born := n.born(c.keys[len(c.keys)-1], c.now)
	if age := max(c.now.UnixMilli()-born, 0); born != 0 && age < least { // 0: adopted
		return -1 - age, nil
	}
	return 0, nil
}

// extendAll is driver.ScriptExtendAll: every key's expiry set if every
// one holds the value, else none.
func (n *Node) extendAll(c *scriptCall) (any, error) {
	ttl, err := scriptInt("extend-all", "TTL", c.args[1], 1)
	if err != nil {
		return nil, err
	}
	for _, k := range c.keys {
		if e, ok := n.live(k, c.now); !ok || e.value != c.args[0] {
			return int64(0), nil
		}
	}
	for _, k := range c.keys {
		e := n.data[k]
		e.expires = c.now.Add(time.Duration(ttl) * time.Millisecond)
		n.data[k] = e
	}
	return int64(1), nil
}

// releaseAll is driver.ScriptReleaseAll: each key that holds the value
// deleted and, given the channel root, handed over through its own
// queue; given a mark, every key's mark written.
func (n *Node) releaseAll(c *scriptCall) (any, error) {
	keys, err := strconv.Atoi(c.args[1])
	root, own := optArg(c.args, 2), optArg(c.args, 4)
	queued, marked := root != "", own != ""
	if err != nil || keys < 1 || len(c.keys) != keys*(1+btoi(queued)+btoi(marked)) {
		return nil, fmt.Errorf("ERR release-all: %d keys do not match n %s, channel %s, mark %s", len(c.keys), c.args[1], root, own)
	}
	px, err := strconv.ParseInt(optArg(c.args, 3), 10, 64)
	if marked && (!setMark(own) || err != nil || px < 1) {
		return nil, fmt.Errorf("ERR release-all: invalid mark %s or mark expiry %s", own, optArg(c.args, 3))
	}
	held, answer := 0, int64(1)
	for i, k := range c.keys[:keys] {
		if e, ok := n.live(k, c.now); ok && e.value == c.args[0] {
			delete(n.data, k)
			held++
			if queued && n.handOff(c, c.keys[keys+i:], []string{root + k}) == 2 {
				answer = 2
			}
		}
	}
	if marked {
		m0 := keys * (1 + btoi(queued))
		for _, k := range c.keys[m0 : m0+keys] {
			n.mark(k, own, px, c.now)
		}
	}
	if held == 0 {
		return int64(0), nil
	}
	return answer, nil
}

// enqueueAll is driver.ScriptEnqueueAll: the ticket queued on the
// preferred key if it is held, else on the first held key, else (forced)
// on the preferred key; the index used, or 0.
func (n *Node) enqueueAll(c *scriptCall) (any, error) {
	ttl, err := scriptInt("enqueue-all", "queue TTL", c.args[1], 1)
	if err != nil {
		return nil, err
	}
	keys := len(c.keys) / 2
	p, err := strconv.Atoi(c.args[3])
	if len(c.keys)%2 != 0 || err != nil || p < 1 || p > keys {
		return nil, fmt.Errorf("ERR enqueue-all: %d keys do not match preferred index %s", len(c.keys), c.args[3])
	}
	at := 0
	if _, ok := n.live(c.keys[p-1], c.now); ok {
		at = p
	} else {
		for i, k := range c.keys[:keys] {
			if _, ok := n.live(k, c.now); ok {
				at = i + 1
				break
			}
		}
	}
	if at == 0 {
		if c.args[2] != "force" {
			return int64(0), nil
		}
		at = p
	}
	qk := c.keys[keys+at-1]
	q, ok := n.live(qk, c.now)
	if !ok {
		q = entry{}
	}
	q.list = append(q.list, c.args[0])
	q.expires = c.now.Add(time.Duration(ttl) * time.Millisecond)
	n.data[qk] = q
	return int64(at), nil
}

// acquireShared is driver.ScriptAcquireShared: a reader added unless a
// writer holds the key or waits for it.
func (n *Node) acquireShared(c *scriptCall) (any, error) {
	const name = "acquire-shared"
	ttl, err := scriptInt(name, "TTL", c.args[1], 1)
	if err != nil {
		return nil, err
	}
	fenced, guarded := c.args[2] == "1", c.args[3] != ""
	if want := 3 + btoi(fenced) + btoi(guarded); !fenced && c.args[2] != "0" || len(c.keys) != want {
		return nil, fmt.Errorf("ERR %s: %d keys do not match fenced %s, guard %s", name, len(c.keys), c.args[2], c.args[3])
	}
	if guarded {
		if young, err := n.young(name, c, c.args[3]); young < 0 || err != nil {
			return young, err
		}
	}
	key, set := c.keys[0], c.keys[1]
	r := n.readers(set, c.now)
	e, held := n.live(key, c.now)
	if held && e.value != driver.SharedValue {
		return int64(0), nil
	}
	if m, ok := n.live(c.keys[2], c.now); ok && (m.value == "1" || setMark(m.value)) && optArg(c.args, 4) != "1" {
		return int64(0), nil // a writer or a set waits, and this reader was not handed the key
	}
	var t int64
	if fenced { // checked before anything is written
		if t, err = n.counter(c.keys[3], c.now); err != nil {
			return nil, fmt.Errorf("ERR %s: fencing counter %s is not an integer", name, c.keys[3])
		}
	}
	if r == nil || !held {
		r = readers{} // readers left without their key are stale
	}
	r[c.args[0]] = c.now.UnixMilli() + ttl
	n.data[set] = entry{zset: r}
	n.data[key] = entry{value: driver.SharedValue}
	n.stretch(key, set, c.now)
	if !fenced {
		return int64(1), nil
	}
	n.data[c.keys[3]] = entry{value: strconv.FormatInt(t+1, 10)}
	return t + 1, nil
}

// extendShared is driver.ScriptExtendShared: a live reader's expiry
// renewed.
func (n *Node) extendShared(c *scriptCall) (any, error) {
	ttl, err := scriptInt("extend-shared", "TTL", c.args[1], 1)
	if err != nil {
		return nil, err
	}
	key, set := c.keys[0], c.keys[1]
	r := n.readers(set, c.now)
	e, ok := n.live(key, c.now)
	if _, in := r[c.args[0]]; !ok || e.value != driver.SharedValue || !in {
		return int64(0), nil
	}
	r[c.args[0]] = c.now.UnixMilli() + ttl
	n.stretch(key, set, c.now)
	return int64(1), nil
}

// releaseShared is driver.ScriptReleaseShared: a reader removed; the last
// one deletes the key and hands it over.
func (n *Node) releaseShared(c *scriptCall) (any, error) {
	key, set := c.keys[0], c.keys[1]
	r := n.readers(set, c.now)
	if _, in := r[c.args[0]]; !in {
		return int64(0), nil
	}
	delete(r, c.args[0])
	if len(r) > 0 {
		n.stretch(key, set, c.now)
		return int64(1), nil
	}
	delete(n.data, set)
	if e, ok := n.live(key, c.now); !ok || e.value != driver.SharedValue {
		return int64(1), nil
	}
	delete(n.data, key)
	return n.handOff(c, c.keys[2:], c.args[1:]), nil
}

// withdraw is driver.ScriptWithdraw: the lock released if it holds the
// value, the writer mark set if readers hold it.
func (n *Node) withdraw(c *scriptCall) (any, error) {
	px, err := scriptInt("withdraw", "mark expiry", c.args[1], 1)
	if err != nil {
		return nil, err
	}
	e, ok := n.live(c.keys[0], c.now)
	switch {
	case ok && e.value == c.args[0]:
		delete(n.data, c.keys[0])
		return n.handOff(c, c.keys[2:], c.args[2:]), nil
	case ok && e.value == driver.SharedValue:
		if m, held := n.live(c.keys[1], c.now); held && m.value != "1" {
			break // another's key of that name: never overwritten
		}
		n.data[c.keys[1]] = entry{value: "1", expires: c.now.Add(time.Duration(px) * time.Millisecond)}
	}
	return int64(0), nil
}

// readers trims the readers set at key of the members whose expiry has
// passed, deleting it when none remain, and returns what remains (nil for
// none); n.mu is held.
func (n *Node) readers(key string, now time.Time) readers {
	e, ok := n.live(key, now)
	if !ok {
		delete(n.data, key)
		return nil
	}
	for m, expiry := range e.zset {
		if expiry <= now.UnixMilli() {
			delete(e.zset, m)
		}
	}
	if len(e.zset) == 0 {
		delete(n.data, key)
		return nil
	}
	return e.zset
}

// liveReaders lists the readers set at key without trimming it: the
// members whose expiry has not passed, soonest to expire first (ties by
// member, as Redis orders them); n.mu is held.
func (n *Node) liveReaders(key string, now time.Time) []reader {
	e, _ := n.live(key, now)
	var out []reader
	for m, expiry := range e.zset {
		if expiry > now.UnixMilli() {
			out = append(out, reader{m, expiry})
		}
	}
	slices.SortFunc(out, func(a, b reader) int {
		return cmp.Or(cmp.Compare(a.expiry, b.expiry), strings.Compare(a.member, b.member))
	})
	return out
}

// stretch makes the readers set at set, and key while it holds
// driver.SharedValue, expire with the set's last reader. A key that holds
// anything else keeps its expiry. n.mu is held.
func (n *Node) stretch(key, set string, now time.Time) {
	s, ok := n.live(set, now)
	if !ok || len(s.zset) == 0 {
		return
	}
	last := int64(0)
	for _, expiry := range s.zset {
		last = max(last, expiry)
	}
	s.expires = time.UnixMilli(last)
	n.data[set] = s
	if e, ok := n.live(key, now); ok && e.value == driver.SharedValue {
		e.expires = s.expires
		n.data[key] = e
	}
}

// live returns the entry at key if it exists and has not expired; n.mu is
// held.
func (n *Node) live(key string, now time.Time) (entry, bool) {
	e, ok := n.data[key]
	if !ok || !e.live(now) {
		return entry{}, false
	}
	return e, true
}

// scriptInt reads an integer argument of at least least, or fails with an
// error that names the script and what the argument is.
func scriptInt(script, what, arg string, least int64) (int64, error) {
	v, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || v < least {
		return 0, fmt.Errorf("ERR %s: invalid %s %s", script, what, arg)
	}
	return v, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Readers reads a readers set directly (set is named as driver.ReadersKey
// names it): each live reader's value and remaining TTL, nil when none.
// Tests use it as they use Get: it counts no call and works on a stopped
// or paused node.
func (n *Node) Readers(set string) map[string]time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.clock.Now()
	var out map[string]time.Duration
	for _, r := range n.liveReaders(set, now) {
		if out == nil {
			out = map[string]time.Duration{}
		}
		out[r.member] = time.UnixMilli(r.expiry).Sub(now)
	}
	return out
}
