package core

import (
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is the lock kinds beyond the mutex (protocol.go): a set of
// keys held all or none (keySet), and a shared (read) lock (shared). Why
// each is safe over a quorum: docs/safety.md; their keys: docs/design.md,
// shared and multi-key locks.

// kindName names k for observers (Event.Lock): lockMulti, lockShared,
// lockSemaphore, lockLeader or lockMutex.
func kindName(k lockKind) string {
	switch k.(type) {
	case *keySet:
		return lockMulti
	case *shared:
		return lockShared
	case *permit, *semaphore:
		return lockSemaphore
	case *election:
		return lockLeader
	}
	return lockMutex
}

// keySet is a multi-key lock: every key of the set, granted all or none on
// each node (ScriptAcquireAll) and held by one value. Each key holds the
// value as a mutex's key does, so a mutex, a read lock or another set on
// any of its keys conflicts with it. A keySet is made for one acquisition
// (and then its Lock): once a round of it loses and it waits, its
// withdrawals mark every key with its priority (driver.SetMark), and its
// grants yield to the marks of sets that waited longer (docs/safety.md).
type keySet struct {
	keys   []string // the keys as given, in canonical order
	rkeys  []string // the keys as stored, in the same order
	fences []string // their fencing counters; nil without fencing
	queues []string // their wait queues; nil if a key has none (waiters poll)
	marks  []string // their WriterKeys; nil if a key has none (no priority)
	n      string   // len(rkeys), for the scripts
	ttl    string
	guard  string
	markPX string // how long a mark outlives the round that wrote it
	// patience is how long, in ms, the acquisition waits before its marks
	// take priority over later sets: the mark expiry, markTTL.
	patience int64
	grants   []string // rkeys, fences, then marks: the grant's keys
	guards   []string // grants, then the birth key: the guarded grant's keys
	herald   []string // rkeys, then queues: the herald's release keys
	drawn    []string // rkeys, then marks: a withdrawal's keys
	hdrawn   []string // rkeys, queues, then marks: the herald's withdrawal's keys

	clock driver.Clock
	id    string       // names the acquisition in its marks, whatever its round's value
	prio  atomic.Int64 // when it first waited, in Unix ms; 0 before
}

// newKeySet returns the multi-key lock on keys (sorted, distinct), or
// refuses keys the protocol cannot use, and on Redis Cluster nodes keys
// in different slots.
func (l *Locker) newKeySet(keys []string) (*keySet, error) {
	s := &keySet{keys: keys, n: strconv.Itoa(len(keys)), ttl: l.ttlMillis, guard: l.guardMillis, markPX: l.markMillis, patience: markTTL(l.o.ttl).Milliseconds(), clock: l.o.clock}
	for _, key := range keys {
		rkey, fence, err := l.storedKeys(key)
		if err != nil {
			return nil, err
		}
		s.rkeys = append(s.rkeys, rkey)
		if fence != "" {
			s.fences = append(s.fences, fence)
		}
	}
	if err := l.oneSlot(s.rkeys); err != nil {
		return nil, err
	}
	s.marks = sideKeys(s.rkeys, driver.WriterKey)
	s.queues = sideKeys(s.rkeys, driver.QueueKey)
	s.grants = slices.Concat(s.rkeys, s.fences, s.marks)
	s.guards = append(slices.Clip(s.grants), driver.BirthKey)
	s.herald = slices.Concat(s.rkeys, s.queues)
	s.drawn = slices.Concat(s.rkeys, s.marks)
	s.hdrawn = slices.Concat(s.rkeys, s.queues, s.marks)
	if s.marks != nil {
		s.id = newValue()
	}
	return s, nil
}

// sideKeys names each key's side key (driver.WriterKey, QueueKey), or
// returns nil when a key has none.
func sideKeys(rkeys []string, side func(string) (string, bool)) []string {
	out := make([]string, len(rkeys))
	for i, k := range rkeys {
		var ok bool
		if out[i], ok = side(k); !ok {
			return nil
		}
	}
	return out
}

// untagged refuses key, which has no hash tag and contains "}", for a
// lock kind whose side keys (what) cannot then share its cluster slot.
func untagged(key, what string) error {
	return invalid("key %q has no hash tag and contains \"}\", so %s its cluster slot; put the key in a hash tag, such as {%s}", key, what, key)
}

// oneSlot refuses keys in different cluster slots when a node is a Redis
// Cluster: one script cannot touch them all there.
func (l *Locker) oneSlot(rkeys []string) error {
	sharded := false
	for i := range l.nodes {
		sharded = sharded || l.sharded(i)
	}
	if !sharded {
		return nil
	}
	for _, k := range rkeys[1:] {
		if driver.HashSlot(k) != driver.HashSlot(rkeys[0]) {
			return invalid("keys %q and %q are in different Redis Cluster slots, so no script can take both; put the keys in one hash tag, such as {orders}:1 and {orders}:2", rkeys[0], k)
		}
	}
	return nil
}

func (s *keySet) stored() string { return s.rkeys[0] }
func (s *keySet) fenced() bool   { return s.fences != nil }
func (s *keySet) shares() bool   { return false }

func (s *keySet) queue() string {
	if s.queues == nil {
		return ""
	}
	return s.queues[0]
}

// candidates are the keys its waiter may queue on, and their queues
// (handoffWaiter).
func (s *keySet) candidates() (rkeys, queues []string) { return s.rkeys, s.queues }

func (s *keySet) raise(token string) request {
	return newRequest(driver.ScriptRaiseFence, s.fences, token)
}

// mark is the acquisition's mark: with its priority once it has waited
// for longer than patience, else fresh, after every waiting set's (a fresh
// mark keeps new readers out, and holds no set back: docs/locks.md).
func (s *keySet) mark() string {
	prio := s.prio.Load()
	if prio == 0 || s.clock.Now().UnixMilli()-prio < s.patience {
		prio = driver.SetMarkFresh
	}
	return driver.SetMark(prio, s.id)
}

func (s *keySet) grant(value string, _ bool) (plain, guarded request) {
	fenced, mark := "0", ""
	if s.fences != nil {
		fenced = "1"
	}
	if s.marks != nil {
		mark = s.mark()
	}
	plain = newRequest(driver.ScriptAcquireAll, s.grants, value, s.ttl, s.n, fenced, "", mark)
	guarded = newRequest(driver.ScriptAcquireAll, s.guards, value, s.ttl, s.n, fenced, s.guard, mark)
	return plain, guarded
}

func (s *keySet) extend(value string) request {
	return newRequest(driver.ScriptExtendAll, s.rkeys, value, s.ttl)
}

// release deletes the keys that hold value; on the herald each hands
// its own queue over.
func (s *keySet) release(value string, herald bool) request {
	if !herald || s.queues == nil {
		return newRequest(driver.ScriptReleaseAll, s.rkeys, value, s.n)
	}
	return newRequest(driver.ScriptReleaseAll, s.herald, value, s.n, driver.ReleaseChannel(""))
}

// withdraw is the release of a round lost by an acquisition that waits:
// it also marks every key with the acquisition's priority, fixed at its
// first wait.
func (s *keySet) withdraw(value string, herald bool) request {
	if s.marks == nil {
		return s.release(value, herald)
	}
	s.prio.CompareAndSwap(0, max(s.clock.Now().UnixMilli(), 1))
	if !herald || s.queues == nil {
		return newRequest(driver.ScriptReleaseAll, s.drawn, value, s.n, "", s.markPX, s.mark())
	}
	return newRequest(driver.ScriptReleaseAll, s.hdrawn, value, s.n, driver.ReleaseChannel(""), s.markPX, s.mark())
}

// markTTL is how long a writer's mark keeps new readers out after its
// last lost round: a fifth of the TTL, at least a second (four default
// retry delays, so that a waiting writer renews it before it lapses), at
// most the TTL. A writer that gives up holds readers back no longer.
func markTTL(ttl time.Duration) time.Duration {
	return min(max(ttl/5, time.Second), ttl)
}

// shared is a read lock: many readers at once, each in the key's readers
// set with its own expiry, while the key holds driver.SharedValue; a
// writer is a mutex on the same key, which SET NX keeps out while readers
// hold it. Once a writer's round loses to readers, its clean-up marks
// that a writer waits (mutex.withdraw), and no new reader is granted.
type shared struct {
	rkey, qkey string
	ttl, guard string
	isFenced   bool
	// names backs the requests' keys: the key, its readers set, its
	// writer mark, then its fencing counter (when fenced), then the birth key.
	names []string
}

// newShared returns the read lock on key, or refuses a key the protocol
// cannot use or whose readers set cannot share its cluster slot.
func (l *Locker) newShared(key string) (*shared, error) {
	rkey, fence, err := l.storedKeys(key)
	if err != nil {
		return nil, err
	}
	readers, ok := driver.ReadersKey(rkey)
	mark, ok2 := driver.WriterKey(rkey)
	if !ok || !ok2 {
		return nil, untagged(key, "its readers cannot share")
	}
	s := &shared{rkey: rkey, ttl: l.ttlMillis, guard: l.guardMillis, isFenced: fence != ""}
	if q, ok := driver.QueueKey(rkey); ok {
		s.qkey = q
	}
	s.names = []string{rkey, readers, mark}
	if fence != "" {
		s.names = append(s.names, fence)
	}
	s.names = append(s.names, driver.BirthKey)
	return s, nil
}

func (s *shared) stored() string { return s.rkey }
func (s *shared) queue() string  { return s.qkey }
func (s *shared) fenced() bool   { return s.isFenced }
func (s *shared) shares() bool   { return true }

func (s *shared) raise(token string) request {
	return newRequest(driver.ScriptRaiseFence, s.names[3:4], token)
}

// grant is the reader's grant; handed (its ticket was popped: it queued
// before any writer that waits now) passes the writer's mark.
func (s *shared) grant(value string, handed bool) (plain, guarded request) {
	fenced, keys, pass := "0", s.names[:len(s.names)-1], "0"
	if s.isFenced {
		fenced = "1"
	}
	if handed {
		pass = "1"
	}
	plain = newRequest(driver.ScriptAcquireShared, keys, value, s.ttl, fenced, "", pass)
	guarded = newRequest(driver.ScriptAcquireShared, s.names, value, s.ttl, fenced, s.guard, pass)
	return plain, guarded
}

func (s *shared) extend(value string) request {
	return newRequest(driver.ScriptExtendShared, s.names[:2], value, s.ttl)
}

func (s *shared) release(value string, herald bool) request {
	if !herald || s.qkey == "" {
		return newRequest(driver.ScriptReleaseShared, s.names[:2], value)
	}
	return newRequest(driver.ScriptReleaseShared, []string{s.rkey, s.names[1], s.qkey}, value, driver.ReleaseChannel(s.rkey))
}

func (s *shared) withdraw(value string, herald bool) request { return s.release(value, herald) }
