package conformance

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core/driver"
)

// sideKeys returns the readers set and the writer mark of k.
func sideKeys(t *testing.T, k string) (readers, writer string) {
	r, ok := driver.ReadersKey(k)
	require.True(t, ok, k)
	w, ok := driver.WriterKey(k)
	require.True(t, ok, k)
	return r, w
}

// share runs ScriptAcquireShared for reader value on k, unfenced and
// unguarded.
func (x scripted) share(k, value string, ttl time.Duration) any {
	x.t.Helper()
	r, w := sideKeys(x.t, k)
	return x.run(driver.ScriptAcquireShared, []string{k, r, w}, value, strconv.FormatInt(ttl.Milliseconds(), 10), "0", "")
}

func (x scripted) extendShared(k, value string, ttl time.Duration) any {
	x.t.Helper()
	r, _ := sideKeys(x.t, k)
	return x.run(driver.ScriptExtendShared, []string{k, r}, value, strconv.FormatInt(ttl.Milliseconds(), 10))
}

func (x scripted) releaseShared(k, value string) any {
	x.t.Helper()
	r, _ := sideKeys(x.t, k)
	return x.run(driver.ScriptReleaseShared, []string{k, r}, value)
}

// readers returns the live readers of k, as ScriptInspect lists them:
// each value, soonest to expire first.
func (x scripted) readers(k string) []string {
	x.t.Helper()
	var out []string
	for i, r := range x.inspect(k)[2:] {
		if i%2 == 0 {
			out = append(out, r.(string))
		}
	}
	return out
}

// inspect runs ScriptInspect on k with its readers set.
func (x scripted) inspect(k string) []any {
	x.t.Helper()
	r, _ := sideKeys(x.t, k)
	reply, ok := x.run(driver.ScriptInspect, []string{k, r}).([]any)
	require.True(x.t, ok, "inspect answers an array")
	if len(reply) < 2 {
		return append(reply, nil)
	}
	return reply
}

// acquireSharedScript: readers share a key that holds SharedValue and
// lives as long as its longest reader; a plain SET NX is refused while
// they hold it; a writer that holds the key or waits for it (its mark)
// refuses new readers; fenced, each reader gets the counter incremented.
func acquireSharedScript(t *testing.T, h Harness) {
	x, k := sharedNode(t, h), key(t)
	assert.Equal(t, int64(1), x.share(k, "r1", 2*time.Second))
	x.holds(k, driver.SharedValue, 2*time.Second, "the key holds SharedValue for its reader's TTL")
	assert.Equal(t, int64(1), x.share(k, "r2", time.Minute))
	x.holds(k, driver.SharedValue, time.Minute, "the key lives as long as its longest reader")
	assert.Equal(t, []string{"r1", "r2"}, x.readers(k))
	ok, err := x.n.SetNX(t.Context(), k, "writer", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "a plain SET NX is refused while readers hold the key")

	held := key(t)
	x.set(held, "writer", time.Minute)
	assert.Equal(t, int64(0), x.share(held, "r1", time.Minute), "a writer holds the key")
	x.holds(held, "writer", time.Minute, "a refused reader changes nothing")
	readers, _ := sideKeys(t, held)
	x.absent(readers, "a refused reader is not added")

	waited := key(t)
	assert.Equal(t, int64(1), x.share(waited, "r1", time.Minute))
	_, writer := sideKeys(t, waited)
	x.set(writer, "1", time.Minute)
	assert.Equal(t, int64(0), x.share(waited, "r2", time.Minute), "a writer waits")
	assert.Equal(t, []string{"r1"}, x.readers(waited), "a refused reader is not added")

	fenced := key(t)
	readers, writer = sideKeys(t, fenced)
	fence, _ := driver.FenceKey(fenced)
	for want, r := range []string{"r1", "r2", "r3"} {
		got := x.run(driver.ScriptAcquireShared, []string{fenced, readers, writer, fence}, r, "60000", "1", "")
		assert.Equal(t, int64(want+1), got, "each fenced reader gets the counter incremented")
	}
}

// acquireSharedGuarded: a young node grants no reader and writes nothing
// but its birth key; an adopted one grants.
func acquireSharedGuarded(t *testing.T, h Harness) {
	x, ok := guardedNode(t, h)
	if !ok {
		return
	}
	k := key(t)
	readers, writer := sideKeys(t, k)
	keys := []string{k, readers, writer, driver.BirthKey}
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	x.set(driver.BirthKey, future, 0)
	assert.Equal(t, int64(-1), x.run(driver.ScriptAcquireShared, keys, "r1", "60000", "0", "60000"), "a young node answers -1 - age")
	x.absent(k, "a young node writes nothing")
	x.absent(readers, "a young node adds no reader")
	x.set(driver.BirthKey, "0", 0)
	assert.Equal(t, int64(1), x.run(driver.ScriptAcquireShared, keys, "r1", "60000", "0", "60000"), "an adopted node grants")
	assert.Equal(t, []string{"r1"}, x.readers(k))
}

// extendSharedScript: a renewal moves the key's expiry with its longest
// reader, both ways; an expired reader no longer counts, and the key goes
// with its last reader, after which a writer gets it.
func extendSharedScript(t *testing.T, h Harness) {
	x, k := sharedNode(t, h), key(t)
	assert.Equal(t, int64(1), x.share(k, "r1", 2*time.Second))
	assert.Equal(t, int64(1), x.extendShared(k, "r1", time.Minute))
	x.holds(k, driver.SharedValue, time.Minute, "renewed with its reader")
	assert.Equal(t, int64(1), x.extendShared(k, "r1", time.Second))
	x.holds(k, driver.SharedValue, time.Second, "shortened with its only reader")
	assert.Equal(t, int64(0), x.extendShared(k, "r9", time.Minute), "not a reader")

	// An expired reader no longer counts: not listed, not renewed, not
	// released; the key stays with the live one.
	assert.Equal(t, int64(1), x.share(k, "short", 30*time.Millisecond))
	assert.Equal(t, int64(1), x.extendShared(k, "r1", time.Minute))
	require.Eventually(t, func() bool { return strings.Join(x.readers(k), ",") == "r1" }, 5*time.Second, 5*time.Millisecond,
		"the expired reader leaves the list")
	assert.Equal(t, int64(0), x.extendShared(k, "short", time.Minute), "an expired reader is not renewed")
	assert.Equal(t, int64(0), x.releaseShared(k, "short"), "an expired reader is not released")
	x.holds(k, driver.SharedValue, time.Minute)

	// The key lives exactly as long as its last reader.
	alone := key(t)
	readers, _ := sideKeys(t, alone)
	assert.Equal(t, int64(1), x.share(alone, "r1", 30*time.Millisecond))
	require.Eventually(t, func() bool {
		v, _ := x.get(alone)
		return v == ""
	}, 5*time.Second, 5*time.Millisecond, "the key expires with its last reader")
	x.absent(readers, "the readers set expires with its last reader")
	assert.Equal(t, int64(0), x.extendShared(alone, "r1", time.Minute), "an expired reader is not renewed")
	x.absent(alone, "a refused renewal writes nothing")
	ok, err := x.n.SetNX(t.Context(), alone, "writer", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "a writer gets the key its expired reader held")
	assert.Equal(t, int64(0), x.share(alone, "r2", time.Minute), "a writer holds the key")
}

// releaseSharedScript: a reader's release leaves the others and the key
// (expiring with the longest of them); the last one deletes the key and
// its set and hands over; a key that holds a writer's value keeps its
// TTL whatever stale readers remain.
func releaseSharedScript(t *testing.T, h Harness) {
	x, k := sharedNode(t, h), key(t)
	readers, _ := sideKeys(t, k)
	assert.Equal(t, int64(1), x.share(k, "r1", time.Minute))
	assert.Equal(t, int64(1), x.share(k, "r2", 30*time.Second))
	assert.Equal(t, int64(1), x.releaseShared(k, "r1"))
	x.holds(k, driver.SharedValue, 30*time.Second, "the key now expires with the reader left")
	assert.Equal(t, []string{"r2"}, x.readers(k))
	assert.Equal(t, int64(0), x.releaseShared(k, "r1"), "released twice")

	ticket := watchOwner + ".shared"
	q := x.enqueue(k, ticket)
	notes, watched := x.watching(k, watchOwner)
	assert.Equal(t, int64(2), x.run(driver.ScriptReleaseShared, []string{k, readers, q}, "r2", driver.ReleaseChannel(k)),
		"the last reader hands over")
	x.absent(k, "the last reader deletes the key")
	x.absent(readers, "the last reader deletes the set")
	assert.Zero(t, x.queued(k, ticket), "the ticket was popped")
	if watched {
		assert.Equal(t, ticket, notes.await(t, 5*time.Second, "the hand-off publishes the ticket"))
	}

	// The key deleted under its readers and taken by a writer: releases
	// of the stale readers never move the writer's expiry.
	w := key(t)
	assert.Equal(t, int64(1), x.share(w, "r1", 2*time.Second))
	assert.Equal(t, int64(1), x.share(w, "r2", 3*time.Second))
	x.del(w)
	x.set(w, "writer", time.Minute)
	assert.Equal(t, int64(1), x.releaseShared(w, "r1"))
	x.holds(w, "writer", time.Minute, "a writer's TTL is the writer's")
	assert.Equal(t, int64(1), x.releaseShared(w, "r2"))
	x.holds(w, "writer", time.Minute, "the last stale reader leaves the writer's key")
}

// sharedGrantChecksFirst: a fenced grant refused for a counter that is
// not an integer writes nothing (Redis keeps a failed script's writes),
// and readers left without their key are dropped by the next grant, not
// revived with it.
func sharedGrantChecksFirst(t *testing.T, h Harness) {
	x, k := sharedNode(t, h), key(t)
	readers, w := sideKeys(t, k)
	fence, ok := driver.FenceKey(k)
	require.True(t, ok)
	x.set(fence, "abc", time.Minute)
	_, err := x.n.Eval(t.Context(), driver.ScriptAcquireShared.Source(), []string{k, readers, w, fence}, []string{"r1", "60000", "1", ""})
	require.ErrorContains(t, err, "acquire-shared: fencing counter", "a counter that is not an integer, named as the script names it")
	x.absent(k, "nothing written")
	x.absent(readers, "no reader written")

	s := key(t)
	assert.Equal(t, int64(1), x.share(s, "stale", time.Hour))
	x.del(s) // the key lost under its reader (deleted, or evicted)
	assert.Equal(t, int64(1), x.share(s, "r1", time.Minute))
	assert.Equal(t, []string{"r1"}, x.readers(s), "the reader left without its key is gone")
	x.holds(s, driver.SharedValue, time.Minute, "the key lives as long as its live reader, not the stale one")
}

// readersHandedTogether: a release whose queue begins with shared
// waiters' tickets (driver.ReaderTicket) hands the key to every one of
// them at once, and to none queued behind the first other ticket, which
// the next release hands it to alone.
func readersHandedTogether(t *testing.T, h Harness) {
	x, k := sharedNode(t, h), key(t)
	r1, r2, w, r3 := watchOwner+".R1", watchOwner+".R2", watchOwner+".3", watchOwner+".R4"
	require.True(t, driver.ReaderTicket(r1) && !driver.ReaderTicket(w))
	var q string
	for _, ticket := range []string{r1, r2, w, r3} {
		q = x.enqueue(k, ticket)
	}
	notes, watched := x.watching(k, watchOwner)
	x.set(k, "writer", time.Minute)
	assert.Equal(t, int64(2), x.run(driver.ScriptRelease, []string{k, q}, "writer", driver.ReleaseChannel(k)))
	if watched {
		assert.Equal(t, r1, notes.await(t, 5*time.Second, "the first reader is handed the key"))
		assert.Equal(t, r2, notes.await(t, 5*time.Second, "and the reader queued behind it"))
	}
	assert.Zero(t, x.queued(k, r1), "popped")
	assert.Zero(t, x.queued(k, r2), "popped with the first")

	x.set(k, "writer2", time.Minute)
	assert.Equal(t, int64(2), x.run(driver.ScriptRelease, []string{k, q}, "writer2", driver.ReleaseChannel(k)))
	assert.Zero(t, x.queued(k, w), "the writer's ticket, alone")
	assert.Equal(t, int64(1), x.queued(k, r3), "a reader behind the writer waits for the next release")
}

// withdrawScript: on the value, a release (with hand-off); on readers,
// the writer mark that refuses new readers while the old ones go on;
// otherwise nothing.
func withdrawScript(t *testing.T, h Harness) {
	x := sharedNode(t, h)
	withdraw := func(k string, queue bool) any {
		_, w := sideKeys(t, k)
		if !queue {
			return x.run(driver.ScriptWithdraw, []string{k, w}, "mine", "5000")
		}
		q, _ := driver.QueueKey(k)
		return x.run(driver.ScriptWithdraw, []string{k, w, q}, "mine", "5000", driver.ReleaseChannel(k))
	}
	k := key(t)
	_, mark := sideKeys(t, k)
	x.set(k, "mine", time.Minute)
	assert.Equal(t, int64(1), withdraw(k, false), "the round's own grant is released")
	x.absent(k, "released")
	x.absent(mark, "a release marks nothing")

	x.set(k, "mine", time.Minute)
	x.enqueue(k, watchOwner+".w")
	assert.Equal(t, int64(2), withdraw(k, true), "a release hands over")
	x.absent(k, "released")

	assert.Equal(t, int64(0), withdraw(k, false), "a missing key")
	x.absent(mark, "a missing key is not marked")
	x.set(k, "theirs", time.Minute)
	assert.Equal(t, int64(0), withdraw(k, false), "another writer's key")
	x.holds(k, "theirs", time.Minute, "another writer's key is untouched")
	x.absent(mark, "another writer's key is not marked")

	r := key(t)
	_, mark = sideKeys(t, r)
	assert.Equal(t, int64(1), x.share(r, "r1", time.Minute))
	assert.Equal(t, int64(0), withdraw(r, false), "readers hold the key")
	x.holds(mark, "1", 5*time.Second, "the writer mark, for the time given")
	assert.Equal(t, int64(0), x.share(r, "r2", time.Minute), "no new reader while a writer waits")
	assert.Equal(t, int64(1), x.extendShared(r, "r1", time.Minute), "the readers in go on")
	assert.Equal(t, []string{"r1"}, x.readers(r))
	readers, w := sideKeys(t, r)
	assert.Equal(t, int64(1), x.run(driver.ScriptAcquireShared, []string{r, readers, w}, "r3", "60000", "0", "", "1"),
		"a reader handed the key (its ticket popped) passes the mark")
	assert.Equal(t, []string{"r1", "r3"}, x.readers(r))

	// A key of the mark's name that someone locked is not a mark: never
	// overwritten, and no reader is refused for it.
	o := key(t)
	_, mark = sideKeys(t, o)
	x.set(mark, "someone's lock", time.Minute)
	assert.Equal(t, int64(1), x.share(o, "r1", time.Minute), "another's key of the mark's name refuses no reader")
	assert.Equal(t, int64(0), withdraw(o, false))
	x.holds(mark, "someone's lock", time.Minute, "and is never overwritten")
}

// inspectReaders: ScriptInspect lists a shared key's live readers with
// their TTLs, soonest to expire first, only when given the readers set.
func inspectReaders(t *testing.T, h Harness) {
	x, k := sharedNode(t, h), key(t)
	assert.Equal(t, int64(1), x.share(k, "r1", time.Minute))
	assert.Equal(t, int64(1), x.share(k, "r2", 30*time.Second))
	got := x.inspect(k)
	require.Len(t, got, 6, "%v", got)
	assert.Equal(t, []any{driver.SharedValue, "r2", "r1"}, []any{got[1], got[2], got[4]})
	assert.InDelta(t, 60000, got[0], 5000, "the key's PTTL")
	assert.InDelta(t, 30000, got[3], 5000, "r2's TTL")
	assert.InDelta(t, 60000, got[5], 5000, "r1's TTL")

	alone, ok := x.run(driver.ScriptInspect, []string{k}).([]any)
	require.True(t, ok)
	assert.Len(t, alone, 2, "without the readers set: {pttl, value}")
	p := key(t)
	x.set(p, "v", time.Minute)
	pr, _ := sideKeys(t, p)
	assert.Len(t, x.run(driver.ScriptInspect, []string{p, pr}), 2, "a mutex's key has no readers")
	missing := key(t)
	mr, _ := sideKeys(t, missing)
	assert.Equal(t, []any{int64(-2)}, x.run(driver.ScriptInspect, []string{missing, mr}), "a missing key")

	assert.Equal(t, int64(1), x.share(k, "short", 300*time.Millisecond))
	assert.Equal(t, []string{"short", "r2", "r1"}, x.readers(k))
	require.Eventually(t, func() bool { return len(x.readers(k)) == 2 }, 5*time.Second, 5*time.Millisecond,
		"an expired reader is not listed")
}

// raiseFenceScript: every counter given is raised, none lowered.
func raiseFenceScript(t *testing.T, h Harness) {
	x, base := sharedNode(t, h), tag(t)
	a, b, c := base+":a", base+":b", base+":c"
	x.set(a, "5", 0)
	x.set(c, "100", 0)
	assert.Equal(t, int64(1), x.run(driver.ScriptRaiseFence, []string{a, b, c}, "42"))
	for k, want := range map[string]string{a: "42", b: "42", c: "100"} {
		v, _ := x.get(k)
		assert.Equal(t, want, v, k)
	}
	assert.Equal(t, int64(1), x.run(driver.ScriptRaiseFence, []string{a}, "50"))
	v, _ := x.get(a)
	assert.Equal(t, "50", v, "one counter, as before")
}

// kindScriptArguments: bad arguments fail with an error naming the
// script, before anything is written.
func kindScriptArguments(t *testing.T, h Harness) {
	x, base := sharedNode(t, h), tag(t)
	k := base + ":a"
	readers, writer := sideKeys(t, k)
	for _, c := range []struct {
		sc         driver.Script
		keys, args []string
	}{
		{driver.ScriptAcquireAll, []string{k}, []string{"v", "soon", "1", "0", ""}},
		{driver.ScriptAcquireAll, []string{k, base + ":b"}, []string{"v", "1000", "1", "0", ""}},
		{driver.ScriptAcquireAll, []string{k}, []string{"v", "1000", "1", "yes", ""}},
		{driver.ScriptAcquireAll, []string{k}, []string{"v", "1000", "x", "0", ""}},
		{driver.ScriptExtendAll, []string{k}, []string{"v", "0"}},
		{driver.ScriptExtendAll, nil, []string{"v", "1000"}},
		{driver.ScriptReleaseAll, []string{k}, []string{"v", "two"}},
		{driver.ScriptReleaseAll, []string{k, writer}, []string{"v", "1", "", "5000", "not a mark"}},
		{driver.ScriptReleaseAll, []string{k, writer}, []string{"v", "1", "", "0", driver.SetMark(1, "x")}},
		{driver.ScriptAcquireAll, []string{k, writer}, []string{"v", "1000", "1", "0", "", "not a mark"}},
		{driver.ScriptEnqueueAll, []string{k, base + ":q"}, []string{"t", "never", "", "1"}},
		{driver.ScriptEnqueueAll, []string{k, base + ":q"}, []string{"t", "1000", "", "2"}},
		{driver.ScriptEnqueueAll, []string{k}, []string{"t", "1000", "", "1"}},
		{driver.ScriptAcquireShared, []string{k, readers, writer}, []string{"v", "-5", "0", ""}},
		{driver.ScriptAcquireShared, []string{k, readers, writer}, []string{"v", "1000", "1", ""}},
		{driver.ScriptExtendShared, []string{k, readers}, []string{"v", "abc"}},
		{driver.ScriptWithdraw, []string{k, writer}, []string{"v", "never"}},
	} {
		_, err := runScript(t.Context(), x.n, c.sc, c.keys, c.args)
		if assert.Error(t, err, "%s %q", c.sc.Name(), c.args) {
			assert.Contains(t, err.Error(), c.sc.Name(), "the error names the script")
		}
		x.absent(k, "%s with bad arguments writes nothing", c.sc.Name())
		x.absent(readers, "%s with bad arguments writes nothing", c.sc.Name())
	}
}
