package conformance

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// runShared checks shared (read) locks (Locker.AcquireShared) over n nodes
// of the backend, with the plain lock as their writer: readers share,
// readers and writers exclude each other under concurrency, a writer keeps
// new readers out, and the last reader's release leaves no key.
func runShared(t *testing.T, h Harness, n int, s Strategy) {
	runKindChecks(t, h, n, s, []kindCheck{
		{"ReadersShare", readersShare, false},
		{"ReadersAndWritersExclude", readersAndWritersExclude, true},
		{"WriterExcludesReaders", writerExcludesReaders, false},
		{"LastReaderLeavesNoKey", lastReaderLeavesNoKey, false},
	})
}

// readersKey returns the readers set of key k as the servers store it.
func readersKey(t *testing.T, k string) string {
	t.Helper()
	r, ok := driver.ReadersKey(k)
	require.True(t, ok, "key %q has a readers set", k)
	return r
}

// readersOn returns, for each of the given readers, on how many servers
// Inspect lists it, and checks that the key holds the shared value where
// it is listed, and that each listed reader's TTL is within the Locker's.
func readersOn(t *testing.T, l *core.Locker, k string, readers ...*core.Lock) []int {
	t.Helper()
	st, err := l.Inspect(t.Context(), k)
	require.NoError(t, err)
	out := make([]int, len(readers))
	for i, ns := range st.Nodes {
		for j, r := range readers {
			if ttl, ok := ns.Readers[r.Value()]; ok {
				assert.Equal(t, driver.SharedValue, ns.Value, "server %d: a key with readers holds the shared value", i)
				assert.Positive(t, ttl, "server %d: reader's TTL", i)
				assert.LessOrEqual(t, ttl, l.TTL(), "server %d: reader's TTL", i)
				out[j]++
			}
		}
	}
	return out
}

// assertOnQuorum checks that each count is at least a quorum of n.
func assertOnQuorum(t *testing.T, n int, counts []int, msg string) {
	t.Helper()
	for j, c := range counts {
		assert.GreaterOrEqual(t, c, quorumOf(n), "%s: reader %d on %d of %d servers", msg, j, c, n)
	}
}

// readersShare takes four readers of one key through two Lockers: all
// hold at once, each listed by Inspect on every server with its TTL, and
// each extends while the others hold.
func readersShare(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	lockers := []*core.Locker{newLocker(t, servers.Nodes(t), s), newLocker(t, servers.Nodes(t), s)}
	ctx, k := t.Context(), key(t)
	readers := make([]*core.Lock, 4)
	for i := range readers {
		r, err := lockers[i%2].TryAcquireShared(ctx, k)
		require.NoError(t, err, "reader %d: readers share the key", i)
		assert.True(t, r.Shared())
		assert.Equal(t, k, r.Key())
		assert.Positive(t, r.Validity())
		readers[i] = r
	}
	assertOnQuorum(t, n, readersOn(t, lockers[0], k, readers...), "every reader held")
	for i, r := range readers {
		assert.NoError(t, r.Extend(ctx), "reader %d extends while the others hold", i)
	}
	for _, r := range readers {
		require.NoError(t, r.Release(ctx))
	}
	assert.Equal(t, repeat("", n), valuesOf(t, servers, k))
}

// readersAndWritersExclude has readers (AcquireShared) and writers
// (Acquire) of one key, through two Lockers, take it concurrently. The
// readers first meet inside, all at once, before the writers start.
// Inside, a writer finds no reader and no writer, and increments a
// register with a read, an extension (a round trip) and a write; a reader
// finds no writer, and the register unchanged across its extension. Any
// overlap is a violation, or loses an increment.
func readersAndWritersExclude(t *testing.T, h Harness, n int, s Strategy) {
	const readers, writers, rounds = 3, 2, 4
	servers := h.Shared(t, n)
	// A writer's lost round keeps new readers out for a while (a fifth of
	// the TTL, at least 1 s): a TTL of 3 s keeps that at 1 s, and leaves
	// validity for the extensions inside under load.
	lockers := contenders(t, servers, s, 2, core.WithTTL(3*time.Second))
	ctx, k := t.Context(), key(t)
	var (
		st      rwState
		met     = make(chan struct{})
		meeting sync.WaitGroup
		wg      sync.WaitGroup
	)
	meeting.Add(readers)
	go func() { meeting.Wait(); close(met) }()
	for g := range readers {
		l := lockers[g%2]
		wg.Go(func() {
			if !readersMeet(ctx, t, l, k, &meeting, met) {
				return
			}
			for range rounds {
				if !st.read(ctx, t, l, k) {
					return
				}
			}
		})
	}
	for g := range writers {
		l := lockers[g%2]
		wg.Go(func() {
			select {
			case <-met:
			case <-ctx.Done():
				return
			}
			for range rounds {
				if !st.write(ctx, t, l, k) {
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, st.violations.Load(), "a writer was inside with a reader or another writer")
	assert.Equal(t, int64(writers*rounds), st.register.Load(), "lost increments: two writers overlapped")
	assert.Equal(t, repeat("", n), valuesOf(t, servers, k))
}

// rwState is what the readers and writers of readersAndWritersExclude
// share: who is inside, the register the writers increment, and the
// violations seen.
type rwState struct {
	readersIn, writersIn, register, violations atomic.Int64
}

// read takes a reader of k and, inside, checks that no writer is inside
// and that the register does not change across an extension. It reports
// whether the reader was taken.
func (st *rwState) read(ctx context.Context, t *testing.T, l *core.Locker, k string) bool {
	r, err := l.AcquireShared(ctx, k)
	if !assert.NoError(t, err, "reader") {
		return false
	}
	st.readersIn.Add(1)
	v := st.register.Load()
	if st.writersIn.Load() != 0 {
		st.violations.Add(1)
	}
	assert.NoError(t, r.Extend(ctx), "a held reader extends")
	if st.writersIn.Load() != 0 || st.register.Load() != v {
		st.violations.Add(1)
	}
	st.readersIn.Add(-1)
	assert.NoError(t, r.Release(ctx))
	return true
}

// write takes a writer of k and, inside, checks that no reader and no
// other writer is inside, and increments the register with a read, an
// extension and a write. It reports whether the writer was taken.
func (st *rwState) write(ctx context.Context, t *testing.T, l *core.Locker, k string) bool {
	w, err := l.Acquire(ctx, k)
	if !assert.NoError(t, err, "writer") {
		return false
	}
	if st.writersIn.Add(1) != 1 || st.readersIn.Load() != 0 {
		st.violations.Add(1)
	}
	v := st.register.Load()
	assert.NoError(t, w.Extend(ctx), "a held writer extends")
	if st.readersIn.Load() != 0 {
		st.violations.Add(1)
	}
	st.register.Store(v + 1)
	st.writersIn.Add(-1)
	assert.NoError(t, w.Release(ctx))
	return true
}

// readersMeet takes a reader of k, waits inside until every reader of
// meeting is inside too, then releases it: readers share. It bounds the
// wait, and reports whether all met.
func readersMeet(ctx context.Context, t *testing.T, l *core.Locker, k string, meeting *sync.WaitGroup, met <-chan struct{}) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := l.AcquireShared(ctx, k)
	if !assert.NoError(t, err, "readers share the key: this one could not join the others") {
		meeting.Done()
		return false
	}
	defer func() { assert.NoError(t, r.Release(context.WithoutCancel(ctx))) }()
	meeting.Done()
	select {
	case <-met:
		return true
	case <-ctx.Done():
		t.Error("readers did not all hold the key at once")
		return false
	}
}

// writerExcludesReaders checks the writer against readers, one step at a
// time: a held writer refuses readers, which leave no entry; a held
// reader refuses a writer, whose lost round leaves nothing of its own, and
// a writer that gives up (TryAcquire) leaves new readers free; a writer
// that waits keeps new readers out while the reader already in extends,
// and takes the key once that reader has released.
func writerExcludesReaders(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s, core.WithTries(1_000_000))
	other := newLocker(t, servers.Nodes(t), s)
	ctx, k := t.Context(), key(t)
	rk := readersKey(t, k)
	mark, ok := driver.WriterKey(k)
	require.True(t, ok, "key %q has a writer mark", k)

	w, err := l.TryAcquire(ctx, k)
	require.NoError(t, err)
	_, err = other.TryAcquireShared(ctx, k)
	require.ErrorIs(t, err, core.ErrNotAcquired, "a writer holds the key")
	assertHeld(t, servers, w.Value(), k)
	assert.Equal(t, repeat("", n), valuesOf(t, servers, rk), "a refused reader leaves no entry")
	require.NoError(t, w.Release(ctx))

	r, err := other.TryAcquireShared(ctx, k)
	require.NoError(t, err)
	_, err = l.TryAcquire(ctx, k)
	require.ErrorIs(t, err, core.ErrNotAcquired, "a reader holds the key")
	assertHeld(t, servers, driver.SharedValue, k) // the refused writer left nothing of its own
	r2, err := other.TryAcquireShared(ctx, k)
	require.NoError(t, err, "a writer that gave up keeps no reader out")
	require.NoError(t, r2.Release(ctx))

	waiting := make(chan acquired, 1)
	go func() {
		w, err := l.Acquire(ctx, k)
		waiting <- acquired{w, err, time.Now()}
	}()
	require.Eventually(t, func() bool { return len(nonEmpty(valuesOf(t, servers, mark))) >= quorumOf(n) },
		10*time.Second, 5*time.Millisecond, "the waiting writer marks a quorum")
	_, err = other.TryAcquireShared(ctx, k)
	require.ErrorIs(t, err, core.ErrNotAcquired, "a writer waits: new readers queue behind it")
	require.NoError(t, r.Extend(ctx), "a reader already in extends while a writer waits")
	assertOnQuorum(t, n, readersOn(t, l, k, r), "extended")
	require.NoError(t, r.Release(ctx))

	bound := time.NewTimer(10 * time.Second)
	defer bound.Stop()
	var got acquired
	select {
	case got = <-waiting:
	case <-bound.C:
		t.Fatal("the waiting writer did not take the key within 10 s of the reader's release")
	}
	require.NoError(t, got.err, "the writer takes the key once the reader is gone")
	require.NoError(t, got.lock.Release(ctx))
	assert.Equal(t, repeat("", n), valuesOf(t, servers, k))
}

// lastReaderLeavesNoKey releases two readers in turn: after the first,
// the key still holds the shared value with the other reader alone; after
// the last, neither the key nor its readers set is left on any server, and
// a writer takes the key at once.
func lastReaderLeavesNoKey(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	ctx, k := t.Context(), key(t)
	rk := readersKey(t, k)

	first, err := l.TryAcquireShared(ctx, k)
	require.NoError(t, err)
	last, err := l.TryAcquireShared(ctx, k)
	require.NoError(t, err)
	require.NoError(t, first.Release(ctx))
	assertHeld(t, servers, driver.SharedValue, k) // a reader still holds it
	on := readersOn(t, l, k, first, last)
	assert.Zero(t, on[0], "the released reader is gone from every server")
	assertOnQuorum(t, n, on[1:], "the other reader")
	assert.NoError(t, first.Release(ctx), "a second release is a no-op")

	require.NoError(t, last.Release(ctx))
	assert.Equal(t, repeat("", n), valuesOf(t, servers, k), "the last reader's release deletes the key")
	assert.Equal(t, repeat("", n), valuesOf(t, servers, rk), "and its readers set")
	st, err := l.Inspect(ctx, k)
	require.NoError(t, err)
	assert.False(t, st.Held())
	for i, ns := range st.Nodes {
		assert.Empty(t, ns.Readers, "server %d", i)
	}
	w, err := l.TryAcquire(ctx, k)
	require.NoError(t, err, "a writer takes the key at once")
	require.NoError(t, w.Release(ctx))
}

// keysKeptAlive holds a lock of a new kind, kept alive, for three TTLs: a
// reader when shared, else a set of two keys. It must stay on a quorum of
// servers and live, and its release must leave no key.
func keysKeptAlive(t *testing.T, h Harness, shared lockOf) {
	servers := h.Shared(t, 3)
	// Four extensions, each bounded by the node timeout, fit before the
	// lock would be at risk (TTL - drift - TTL/5): a loaded machine's
	// slow answers cost a few of them, not the lock.
	const ttl, interval = 1500 * time.Millisecond, 250 * time.Millisecond
	l := newLocker(t, servers.Nodes(t), parallel, core.WithTTL(ttl), core.WithKeepAlive(interval),
		core.WithNodeTimeout(200*time.Millisecond))
	ctx := t.Context()
	lock, held, ks := takeKind(t, l, servers, shared)
	require.NoError(t, lock.KeepAlive())

	end := time.NewTimer(3 * ttl)
	defer end.Stop()
	tick := time.NewTicker(ttl / 5)
	defer tick.Stop()
	checks := 0
	for running := true; running; {
		select {
		case <-lock.Done():
			t.Fatalf("the kept-alive lock ended: %v", lock.Err())
		case <-end.C:
			running = false
		case <-tick.C:
			assert.GreaterOrEqual(t, held(), quorumOf(3), "the lock must stay on a quorum")
			checks++
		}
	}
	require.NoError(t, lock.Err())
	assert.Positive(t, lock.Validity())
	assert.GreaterOrEqual(t, checks, 5, "the servers were checked while it was held")
	// 4.5 s of holding at one extension per 250 ms.
	assert.GreaterOrEqual(t, l.Stats().RenewalTicks, uint64(9), "renewals while it was held")
	require.NoError(t, lock.Release(ctx))
	for _, k := range ks {
		assert.Equal(t, repeat("", 3), valuesOf(t, servers, k), "released: key %q", k)
	}
}

// takeKind takes a reader of a new key (kindReader), a permit of a new
// semaphore (kindPermit), or a set of two new keys, and returns it, a function counting the servers that hold it, and
// the keys the servers keep for it.
func takeKind(t *testing.T, l *core.Locker, servers Servers, shared lockOf) (*core.Lock, func() int, []string) {
	t.Helper()
	ctx, base := t.Context(), key(t)
	if shared == kindPermit {
		return takePermit(t, l, servers)
	}
	if shared == kindReader {
		lock, err := l.AcquireShared(ctx, base)
		require.NoError(t, err)
		// Inspect through a Locker of the default node timeout.
		inspector := newLocker(t, servers.Nodes(t), parallel, core.WithTTL(l.TTL()))
		held := func() int { return readersOn(t, inspector, base, lock)[0] }
		return lock, held, []string{base, readersKey(t, base)}
	}
	ks := setKeys(servers, base, "a", "b")
	lock, err := l.AcquireAll(ctx, ks...)
	require.NoError(t, err)
	held := func() int {
		on := 0
		for i := range servers.Len() {
			all := true
			for _, k := range ks {
				v, _, ok, err := servers.Get(ctx, i, k)
				require.NoError(t, err)
				all = all && ok && v == lock.Value()
			}
			if all {
				on++
			}
		}
		return on
	}
	return lock, held, ks
}

// keysLost keeps a lock of a new kind alive and deletes, on a majority of
// servers, a reader's entry (its readers set), a permit's slot, or one
// key of a set of two: the next extension is refused there, which ends the lock
// at once, long before its validity would have run out.
func keysLost(t *testing.T, h Harness, shared lockOf) {
	servers := h.Shared(t, 3)
	const ttl, interval = 1500 * time.Millisecond, 300 * time.Millisecond
	l := newLocker(t, servers.Nodes(t), parallel, core.WithTTL(ttl), core.WithKeepAlive(interval))
	ctx := t.Context()
	lock, _, ks := takeKind(t, l, servers, shared)
	require.NoError(t, lock.KeepAlive())
	require.NoError(t, lock.Err())

	for i := range quorumOf(3) {
		require.NoError(t, servers.Del(ctx, i, ks[len(ks)-1]))
	}
	deleted := time.Now()
	bound := time.NewTimer(ttl + time.Second)
	defer bound.Stop()
	select {
	case <-lock.Done():
	case <-bound.C:
		t.Fatalf("Done still open %v after %q was deleted from a majority", ttl+time.Second, ks[len(ks)-1])
	}
	// One interval until the extension, one node timeout for it, and room
	// for a loaded machine (as in DeletedKeyLostAtNextExtension).
	assert.Less(t, time.Since(deleted), interval+testNodeTimeout+400*time.Millisecond, "the loss must be found by the next extension")
	err := lock.Err()
	require.ErrorIs(t, err, core.ErrLockLost)
	assert.NotErrorIs(t, err, core.ErrValidityExpired, "the extension found the entry gone, before the validity ran out")
	var qe *core.QuorumError
	if assert.ErrorAs(t, err, &qe, "the cause carries the refused extension") {
		assert.Equal(t, core.OpExtend, qe.Op)
		_, refused, _ := qe.Counts()
		assert.GreaterOrEqual(t, refused, quorumOf(3))
	}
	assert.Zero(t, lock.Validity())
	// Release removes what is left of the lost lock: the set's other keys,
	// the reader's entry on the other servers. Whether that was a quorum
	// decides its error, which is not the point here.
	if err := lock.Release(ctx); err != nil {
		assert.ErrorIs(t, err, core.ErrNotHeld)
	}
	left := ks
	if shared == kindReader {
		left = ks[1:] // the key itself expires with its last reader
	}
	for _, k := range left {
		assert.Equal(t, repeat("", 3), valuesOf(t, servers, k), "key %q after the release", k)
	}
}
