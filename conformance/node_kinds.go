package conformance

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// kindScripts are the node contract's checks of the scripts of multi-key
// and shared (read) locks, run directly on one node. Keys of one call
// share a hash tag, so that they share a Redis Cluster slot.
var kindScripts = []struct {
	name string
	fn   func(*testing.T, Harness)
}{
	{"AcquireAllScript", acquireAllScript},
	{"ExtendAllScript", extendAllScript},
	{"ReleaseAllScript", releaseAllScript},
	{"EnqueueAllScript", enqueueAllScript},
	{"SetMarks", setMarks},
	{"SetMarksWithoutPriority", setMarksWithoutPriority},
	{"AcquireSharedScript", acquireSharedScript},
	{"AcquireSharedGuarded", acquireSharedGuarded},
	{"ExtendSharedScript", extendSharedScript},
	{"ReleaseSharedScript", releaseSharedScript},
	{"ReadersHandedTogether", readersHandedTogether},
	{"SharedGrantChecksFirst", sharedGrantChecksFirst},
	{"WithdrawScript", withdrawScript},
	{"InspectReaders", inspectReaders},
	{"RaiseFenceScript", raiseFenceScript},
	{"KindScriptArguments", kindScriptArguments},
	{"LeaderScript", leaderScript},
	{"EnqueueNeedsEverySlot", enqueueNeedsEverySlot},
}

// scripted is one node under test and its servers, with the calls the
// checks of the lock kinds' scripts make; each fails the test on an error.
type scripted struct {
	t *testing.T
	n core.Node
	s Servers
}

func sharedNode(t *testing.T, h Harness) scripted {
	n, s := oneNode(t, h)
	return scripted{t, n, s}
}

// guardedNode is a node on an isolated server, whose birth key the check
// may change; ok is false for a sharded node, which the restart guard
// leaves out (and whose birth key lives in a slot of its own).
func guardedNode(t *testing.T, h Harness) (scripted, bool) {
	if sh, ok := sharedNode(t, h).n.(driver.Sharded); ok && sh.Sharded() {
		return scripted{}, false
	}
	n, s := isolatedNode(t, h)
	return scripted{t, n, s}, true
}

// run runs script sc as core does (EVALSHA, then EVAL on NOSCRIPT).
func (x scripted) run(sc driver.Script, keys []string, args ...string) any {
	x.t.Helper()
	r, err := runScript(x.t.Context(), x.n, sc, keys, args)
	require.NoError(x.t, err, "%s %q %q", sc.Name(), keys, args)
	return r
}

func (x scripted) set(k, v string, ttl time.Duration) {
	x.t.Helper()
	require.NoError(x.t, x.s.Set(x.t.Context(), 0, k, v, ttl))
}

func (x scripted) del(k string) {
	x.t.Helper()
	require.NoError(x.t, x.s.Del(x.t.Context(), 0, k))
}

// get reads a string key: its value and TTL; "" when absent.
func (x scripted) get(k string) (string, time.Duration) {
	x.t.Helper()
	v, ttl, ok, err := x.s.Get(x.t.Context(), 0, k)
	require.NoError(x.t, err, "GET %s", k)
	if !ok {
		return "", 0
	}
	return v, ttl
}

// absent checks that k does not exist, whatever its type would be (a
// sorted set that exists fails GET on Redis).
func (x scripted) absent(k string, msgAndArgs ...any) {
	x.t.Helper()
	_, _, ok, err := x.s.Get(x.t.Context(), 0, k)
	assert.NoError(x.t, err, msgAndArgs...)
	assert.False(x.t, ok, msgAndArgs...)
}

// holds checks k's value and that its TTL is within 20% of ttl (or up to
// ttl, when ttl is under a second).
func (x scripted) holds(k, value string, ttl time.Duration, msgAndArgs ...any) {
	x.t.Helper()
	v, got := x.get(k)
	assert.Equal(x.t, value, v, msgAndArgs...)
	assert.LessOrEqual(x.t, got, ttl, msgAndArgs...)
	if ttl >= time.Second { // half the TTL: slack for a loaded machine
		assert.Greater(x.t, got, ttl/2, msgAndArgs...)
	}
}

// enqueue queues ticket (forced) on the wait queue of k.
func (x scripted) enqueue(k, ticket string) string {
	x.t.Helper()
	q, ok := driver.QueueKey(k)
	require.True(x.t, ok)
	x.run(driver.ScriptEnqueue, []string{k, q}, ticket, "60000", "force")
	return q
}

// queued reports how many copies of ticket k's wait queue held, and takes
// them out.
func (x scripted) queued(k, ticket string) int64 {
	x.t.Helper()
	q, _ := driver.QueueKey(k)
	r, _ := x.run(driver.ScriptDequeue, []string{q}, ticket).(int64)
	return r
}

// watching subscribes to owner's channel of k where the node can watch,
// for a check that a hand-off publishes the ticket; ok is false where it
// cannot.
func (x scripted) watching(k, owner string) (notices, bool) {
	x.t.Helper()
	w, ok := watcherOf(x.t, x.n)
	c := newNotices()
	if ok {
		watchFor(x.t, w, driver.WaiterChannel(k, owner), c)
	}
	return c, ok
}

// tag returns a hash-tagged base for the keys of one call.
func tag(t *testing.T) string { return "{" + key(t) + "}" }

// fences lists the fencing counters of keys.
func fences(t *testing.T, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		f, ok := driver.FenceKey(k)
		require.True(t, ok, k)
		out[i] = f
	}
	return out
}

// acquireAll runs ScriptAcquireAll on locks, with their counters when
// fenced and the birth key when guard is not "".
func (x scripted) acquireAll(value string, locks []string, fenced bool, guard string) any {
	x.t.Helper()
	keys, flag := append([]string{}, locks...), "0"
	if fenced {
		keys, flag = append(keys, fences(x.t, locks)...), "1"
	}
	if guard != "" {
		keys = append(keys, driver.BirthKey)
	}
	return x.run(driver.ScriptAcquireAll, keys, value, "60000", strconv.Itoa(len(locks)), flag, guard)
}

// acquireAllScript: every key granted (fenced: one token, 1 + the largest
// counter, on every counter), or none when any is held, wherever it stands
// in the set; guarded, a young node grants nothing.
func acquireAllScript(t *testing.T, h Harness) {
	for _, c := range []struct {
		name            string
		fenced, guarded bool
	}{{"plain", false, false}, {"fenced", true, false}, {"guarded", false, true}, {"guarded-fenced", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			x, guard := sharedNode(t, h), ""
			if c.guarded {
				var ok bool
				if x, ok = guardedNode(t, h); !ok {
					return
				}
				guard = "0"
				x.set(driver.BirthKey, "0", 0)
			}
			acquireAllGrants(x, c.fenced, guard)
			acquireAllRefuses(x, c.fenced, guard)
			if c.guarded {
				future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
				x.set(driver.BirthKey, future, 0)
				base := tag(t)
				locks := []string{base + ":a", base + ":b"}
				assert.Equal(t, int64(-1), x.acquireAll("mine", locks, c.fenced, "60000"), "a young node answers -1 - age")
				for _, k := range append(locks, fences(t, locks)...) {
					x.absent(k, "a young node writes nothing: %s", k)
				}
			}
		})
	}
}

func acquireAllGrants(x scripted, fenced bool, guard string) {
	t, base := x.t, tag(x.t)
	locks := []string{base + ":a", base + ":b", base + ":c"}
	want := int64(1)
	if fenced {
		x.set(fences(t, locks)[1], "41", 0)
		want = 42
	}
	assert.Equal(t, want, x.acquireAll("mine", locks, fenced, guard))
	for _, k := range locks {
		x.holds(k, "mine", time.Minute, "every key granted: %s", k)
	}
	if fenced {
		for _, f := range fences(t, locks) {
			v, _ := x.get(f)
			assert.Equal(t, "42", v, "every counter set to 1 + the largest: %s", f)
		}
	}
	assert.Equal(t, int64(0), x.acquireAll("again", locks, fenced, guard), "a held set is refused")
	for _, k := range locks {
		x.holds(k, "mine", time.Minute, "a refusal changes nothing: %s", k)
	}
}

// acquireAllRefuses holds one key of a set, at each position in turn, and
// checks that the set is refused and nothing else written.
func acquireAllRefuses(x scripted, fenced bool, guard string) {
	t := x.t
	for held := range 3 {
		base := tag(t)
		locks := []string{base + ":a", base + ":b", base + ":c"}
		x.set(locks[held], "theirs", time.Minute)
		assert.Equal(t, int64(0), x.acquireAll("mine", locks, fenced, guard), "key %d of 3 held", held)
		for i, k := range locks {
			if i == held {
				x.holds(k, "theirs", time.Minute, "the rival's key is untouched")
				continue
			}
			x.absent(k, "no partial grant: key %d with key %d held", i, held)
			x.absent(fences(t, locks)[i], "no counter written: key %d with key %d held", i, held)
		}
	}
}

// extendAllScript: every key renewed when every one holds the value, else
// no TTL changes.
func extendAllScript(t *testing.T, h Harness) {
	x, base := sharedNode(t, h), tag(t)
	a, b := base+":a", base+":b"
	x.set(a, "mine", 2*time.Second)
	x.set(b, "theirs", 2*time.Second)
	assert.Equal(t, int64(0), x.run(driver.ScriptExtendAll, []string{a, b}, "mine", "60000"), "one key held by another")
	x.holds(a, "mine", 2*time.Second, "a refused extension changes no TTL")
	x.holds(b, "theirs", 2*time.Second)

	x.set(b, "mine", 2*time.Second)
	assert.Equal(t, int64(1), x.run(driver.ScriptExtendAll, []string{a, b}, "mine", "60000"))
	x.holds(a, "mine", time.Minute, "renewed")
	x.holds(b, "mine", time.Minute, "renewed")

	x.del(b)
	assert.Equal(t, int64(0), x.run(driver.ScriptExtendAll, []string{a, b}, "mine", "5000"), "one key missing")
	x.holds(a, "mine", time.Minute, "a refused extension changes no TTL")
	x.absent(b, "a refused extension creates nothing")
}

// queues lists the wait queues of keys.
func queues(t *testing.T, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		q, ok := driver.QueueKey(k)
		require.True(t, ok, k)
		out[i] = q
	}
	return out
}

// writers lists the writer marks (driver.WriterKey) of keys.
func writers(t *testing.T, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		_, out[i] = sideKeys(t, k)
	}
	return out
}

// releaseAllScript: each key that holds the value deleted, others kept;
// with the queues, each deleted key handed to its own queue's oldest
// ticket.
func releaseAllScript(t *testing.T, h Harness) {
	x, base := sharedNode(t, h), tag(t)
	a, b, c := base+":a", base+":b", base+":c"
	x.set(a, "mine", time.Minute)
	x.set(b, "mine", time.Minute)
	x.set(c, "theirs", time.Minute)
	assert.Equal(t, int64(1), x.run(driver.ScriptReleaseAll, []string{a, b, c}, "mine", "3"))
	x.absent(a, "released")
	x.absent(b, "released")
	x.holds(c, "theirs", time.Minute, "another's key is kept")
	assert.Equal(t, int64(0), x.run(driver.ScriptReleaseAll, []string{a, b, c}, "mine", "3"), "nothing held")

	locks := []string{a, b}
	herald := append(slices.Clone(locks), queues(t, locks)...)
	root := driver.ReleaseChannel("")
	ticket := watchOwner + ".all"
	x.enqueue(b, ticket)
	notes, watched := x.watching(b, watchOwner)
	assert.Equal(t, int64(0), x.run(driver.ScriptReleaseAll, herald, "mine", "2", root), "nothing held: no hand-off")
	assert.Equal(t, int64(1), x.queued(b, ticket), "a release that deleted nothing leaves the queue")

	x.enqueue(b, ticket)
	x.set(a, "mine", time.Minute)
	x.set(b, "mine", time.Minute)
	assert.Equal(t, int64(2), x.run(driver.ScriptReleaseAll, herald, "mine", "2", root), "the second key's queue hands over")
	x.absent(a, "released")
	x.absent(b, "released")
	assert.Zero(t, x.queued(b, ticket), "the ticket was popped")
	if watched {
		assert.Equal(t, ticket, notes.await(t, 5*time.Second, "the hand-off publishes the ticket on the second key's channel"))
	}

	// Each key hands over only its own queue, and only if it was deleted.
	other := watchOwner + ".other"
	x.enqueue(a, ticket)
	x.enqueue(b, other)
	x.set(a, "theirs", time.Minute)
	x.set(b, "mine", time.Minute)
	assert.Equal(t, int64(2), x.run(driver.ScriptReleaseAll, herald, "mine", "2", root))
	x.absent(b, "released")
	assert.Equal(t, int64(1), x.queued(a, ticket), "the first key still held: its ticket waits")
	assert.Zero(t, x.queued(b, other), "the released key's ticket was popped")
	x.set(b, "mine", time.Minute)
	assert.Equal(t, int64(1), x.run(driver.ScriptReleaseAll, herald, "mine", "2", root), "empty queues: released, nothing handed")
}

// enqueueAllScript: a set's ticket goes to the queue of the preferred key
// when it is held, else of the first held key, else nowhere unless
// forced; the answer is the key's index.
func enqueueAllScript(t *testing.T, h Harness) {
	x, base := sharedNode(t, h), tag(t)
	locks := []string{base + ":a", base + ":b", base + ":c"}
	keys := append(slices.Clone(locks), queues(t, locks)...)
	enqueue := func(ticket, mode string, preferred int) any {
		return x.run(driver.ScriptEnqueueAll, keys, ticket, "60000", mode, strconv.Itoa(preferred))
	}
	assert.Equal(t, int64(0), enqueue("t.1", "", 1), "no key held: nothing queued")
	for _, k := range locks {
		assert.Zero(t, x.queued(k, "t.1"), "nothing queued on %s", k)
	}
	x.set(locks[2], "theirs", time.Minute)
	assert.Equal(t, int64(3), enqueue("t.2", "", 1), "the first held key")
	assert.Equal(t, int64(1), x.queued(locks[2], "t.2"))
	x.set(locks[1], "theirs", time.Minute)
	assert.Equal(t, int64(3), enqueue("t.3", "", 3), "the preferred key, held")
	assert.Equal(t, int64(1), x.queued(locks[2], "t.3"))
	assert.Equal(t, int64(2), enqueue("t.4", "", 1), "the first held key, the preferred one free")
	assert.Equal(t, int64(1), x.queued(locks[1], "t.4"))
	x.del(locks[1])
	x.del(locks[2])
	assert.Equal(t, int64(2), enqueue("t.5", "force", 2), "forced: the preferred key")
	assert.Equal(t, int64(1), x.queued(locks[1], "t.5"))
}

// setMarks: a set's withdrawal marks each of its keys' writer marks with
// its priority (driver.SetMark), free or held, over a writer's mark and
// a younger set's, never over an older set's or another's key. A grant
// yields to another set's older mark, passes its own and younger ones,
// and deletes its own; a new reader is refused by a set's mark, a reader
// handed the key is not; a mutex's withdrawal leaves a set's mark.
func setMarks(t *testing.T, h Harness) {
	x, base := sharedNode(t, h), tag(t)
	locks := []string{base + ":a", base + ":b", base + ":c"}
	marks := writers(t, locks)
	old, mine, young := driver.SetMark(1000, "old"), driver.SetMark(2000, "mine"), driver.SetMark(3000, "young")
	fresh := driver.SetMark(driver.SetMarkFresh, "fresh")
	withdraw := func(own string) any {
		return x.run(driver.ScriptReleaseAll, append(slices.Clone(locks), marks...), "v", "3", "", "5000", own)
	}
	grant := func(value, own string) any {
		return x.run(driver.ScriptAcquireAll, append(slices.Clone(locks), marks...), value, "60000", "3", "0", "", own)
	}

	x.set(locks[0], "v", time.Minute)
	x.set(locks[1], "theirs", time.Minute)
	x.set(marks[1], "1", time.Minute)
	x.set(marks[2], young, time.Minute)
	assert.Equal(t, int64(1), withdraw(mine), "the round's own grant is released")
	x.absent(locks[0], "released")
	x.holds(locks[1], "theirs", time.Minute, "another's key is kept")
	for i, m := range marks {
		x.holds(m, mine, 5*time.Second, "key %d marked: free, over a writer's mark, over a younger set's", i)
	}
	x.set(marks[0], old, time.Minute)
	x.set(marks[1], "someone's lock", time.Minute)
	assert.Equal(t, int64(0), withdraw(mine), "nothing held: marks only")
	x.holds(marks[0], old, time.Minute, "an older set's mark is kept")
	x.holds(marks[1], "someone's lock", time.Minute, "another's key is never overwritten")
	x.holds(marks[2], mine, 5*time.Second, "its own mark renewed")

	x.del(locks[1])
	assert.Equal(t, int64(0), grant("w", young), "an older set waits: a younger one is refused")
	assert.Equal(t, int64(0), grant("w", fresh), "a set that never waited is refused")
	for _, k := range locks {
		x.absent(k, "a refusal writes nothing")
	}
	x.del(marks[0])
	x.set(marks[1], young, time.Minute)
	assert.Equal(t, int64(1), grant("w", mine), "its own mark and a younger one refuse nothing")
	x.absent(marks[2], "its own mark deleted with the grant")
	x.holds(marks[1], young, time.Minute, "another's mark kept")
	assert.Equal(t, int64(1), x.run(driver.ScriptReleaseAll, locks, "w", "3"))
}

// setMarksWithoutPriority: a set's mark without priority (a set that has
// not waited long) holds back no set and is overwritten by one with
// priority; any set's mark keeps new readers out, but for readers handed
// the key.
func setMarksWithoutPriority(t *testing.T, h Harness) {
	x, base := sharedNode(t, h), tag(t)
	locks := []string{base + ":a", base + ":b", base + ":c"}
	marks := writers(t, locks)
	old, mine := driver.SetMark(1000, "old"), driver.SetMark(2000, "mine")
	fresh := driver.SetMark(driver.SetMarkFresh, "fresh")
	x.set(marks[1], fresh, time.Minute)
	assert.Equal(t, int64(1), x.run(driver.ScriptAcquireAll, append(slices.Clone(locks), marks...), "w", "60000", "3", "0", "", driver.SetMark(driver.SetMarkFresh, "other")),
		"a fresh mark refuses no set")
	x.holds(marks[1], fresh, time.Minute, "another's fresh mark kept")
	assert.Equal(t, int64(1), x.run(driver.ScriptReleaseAll, locks, "w", "3"))
	assert.Equal(t, int64(0), x.run(driver.ScriptReleaseAll, append(slices.Clone(locks), marks...), "v", "3", "", "5000", mine), "marks only")
	x.holds(marks[1], mine, 5*time.Second, "a mark with priority overwrites a fresh one")
	x.set(marks[0], driver.SetMark(driver.SetMarkFresh, "mine"), time.Minute) // its own, from before its patience ended
	assert.Equal(t, int64(1), x.run(driver.ScriptAcquireAll, append(slices.Clone(locks), marks...), "w", "60000", "3", "0", "", mine))
	for i, m := range marks {
		x.absent(m, "key %d: the grant deletes every mark of its own, with priority or not", i)
	}
	assert.Equal(t, int64(1), x.run(driver.ScriptReleaseAll, locks, "w", "3"))

	r := base + ":r"
	readers, w := sideKeys(t, r)
	x.set(w, fresh, time.Minute)
	assert.Equal(t, int64(0), x.share(r, "r1", time.Minute), "no new reader while a set waits, even without priority")
	x.set(w, old, time.Minute)
	assert.Equal(t, int64(0), x.share(r, "r1", time.Minute), "no new reader while a set waits")
	assert.Equal(t, int64(1), x.run(driver.ScriptAcquireShared, []string{r, readers, w}, "r2", "60000", "0", "", "1"),
		"a reader handed the key passes a set's mark")
	assert.Equal(t, int64(0), x.run(driver.ScriptWithdraw, []string{r, w}, "mine", "5000"), "a writer loses to the reader")
	x.holds(w, old, time.Minute, "a writer's withdrawal leaves a set's mark")
}

// leaderScript checks ScriptLeader: a live key's value and its counter
// (0 when missing or not an integer), nothing for a missing key.
func leaderScript(t *testing.T, h Harness) {
	x, base := sharedNode(t, h), tag(t)
	k, counter := base+":lead", base+":lead:fence"
	assert.Empty(t, x.run(driver.ScriptLeader, []string{k, counter}), "nobody leads")
	x.set(k, "r:host-a", time.Minute)
	assert.Equal(t, []any{"r:host-a", int64(0)}, x.run(driver.ScriptLeader, []string{k, counter}), "no counter yet")
	x.set(counter, "7", 0)
	assert.Equal(t, []any{"r:host-a", int64(7)}, x.run(driver.ScriptLeader, []string{k, counter}))
	x.set(counter, "seven", 0)
	assert.Equal(t, []any{"r:host-a", int64(0)}, x.run(driver.ScriptLeader, []string{k, counter}), "a counter that is no integer reads 0")
	x.del(k)
	x.del(counter)
}
