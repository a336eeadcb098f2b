package conformance

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// runSemaphore checks counting semaphores (Locker.AcquirePermit) over n
// nodes of the backend: at most K hold under concurrency, a release
// frees a permit for a waiter, a permit is released once and only by its
// holder, and fencing tokens increase across the permits.
func runSemaphore(t *testing.T, h Harness, n int, s Strategy) {
	runKindChecks(t, h, n, s, []kindCheck{
		{"AtMostKHold", atMostKHold, true},
		{"ReleaseFreesPermit", releaseFreesPermit, false},
		{"PermitReleasedOnceByHolder", permitReleasedOnceByHolder, false},
		{"PermitTokensIncrease", permitTokensIncrease, false},
	})
}

// permitKey returns slot i of the semaphore k as the servers store it.
func permitKey(t *testing.T, k string, i int) string {
	t.Helper()
	slot, ok := driver.PermitKey(k, i)
	require.True(t, ok, "key %q has permit slots", k)
	return slot
}

// atMostKHold has six goroutines, through two Lockers, take one of two
// permits several times each and, inside, count themselves in a shared
// counter with an extension (a round trip) between entry and exit: the
// counter must never exceed 2, and every acquisition must end.
func atMostKHold(t *testing.T, h Harness, n int, s Strategy) {
	const goroutines, each, permits = 6, 4, 2
	servers := h.Shared(t, n)
	lockers := contenders(t, servers, s, 2)
	ctx, k := t.Context(), key(t)
	var (
		inside, most, done atomic.Int64
		wg                 sync.WaitGroup
	)
	for g := range goroutines {
		l := lockers[g%len(lockers)]
		wg.Go(func() {
			for range each {
				lock, err := l.AcquirePermit(ctx, k, permits)
				if !assert.NoError(t, err) {
					return
				}
				now := inside.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				assert.NoError(t, lock.Extend(ctx), "a held permit extends")
				inside.Add(-1)
				assert.NoError(t, lock.Release(ctx))
				done.Add(1)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int64(permits), "more holders inside than permits")
	assert.Equal(t, int64(goroutines*each), done.Load(), "every acquisition ended")
	for i := range permits {
		assert.Equal(t, repeat("", n), valuesOf(t, servers, permitKey(t, k, i)), "slot %d after the last release", i)
	}
}

// releaseFreesPermit takes both permits of a semaphore of two: a third
// TryAcquirePermit is refused and InspectPermits shows both held; a waiter
// holds once one is released, on the slot it freed.
func releaseFreesPermit(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	waiter := newLocker(t, servers.Nodes(t), s, core.WithWakeOnRelease(true), core.WithTries(1_000_000))
	ctx, k := t.Context(), key(t)
	a, err := l.TryAcquirePermit(ctx, k, 2)
	require.NoError(t, err)
	b, err := l.TryAcquirePermit(ctx, k, 2)
	require.NoError(t, err, "the second permit is free: the sweep finds it")
	assert.Equal(t, k, a.Key())
	_, err = l.TryAcquirePermit(ctx, k, 2)
	require.ErrorIs(t, err, core.ErrNotAcquired, "both permits are held")
	states, err := l.InspectPermits(ctx, k, 2)
	require.NoError(t, err)
	require.Len(t, states, 2)
	held := map[string]int{}
	for i, st := range states {
		assert.True(t, st.Held(), "slot %d is held", i)
		v, _, _ := st.Holder()
		held[v] = i
	}
	require.Contains(t, held, a.Value())
	require.Contains(t, held, b.Value())

	got := make(chan *core.Lock, 1)
	go func() {
		c, err := waiter.AcquirePermit(ctx, k, 2)
		assert.NoError(t, err)
		got <- c
	}()
	select {
	case c := <-got:
		t.Fatalf("a third holder while two hold: %v", c)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, a.Release(ctx))
	c := <-got
	require.NotNil(t, c)
	assert.GreaterOrEqual(t, holding(t, servers, permitKey(t, k, held[a.Value()]), c.Value()), quorumOf(n), "the waiter holds the freed slot")
	require.NoError(t, b.Release(ctx))
	require.NoError(t, c.Release(ctx))
}

// permitReleasedOnceByHolder: a released permit's second Release does
// not free the slot a new holder took, and a permit whose slot another
// value took over is not released (ErrNotHeld) and leaves that value.
func permitReleasedOnceByHolder(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	ctx, k := t.Context(), key(t)
	slot := permitKey(t, k, 0)
	a, err := l.TryAcquirePermit(ctx, k, 1)
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx))
	b, err := l.TryAcquirePermit(ctx, k, 1)
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx), "a second release is a no-op")
	assert.GreaterOrEqual(t, holding(t, servers, slot, b.Value()), quorumOf(n), "a second release must not free the new holder's slot")

	for i := range n {
		require.NoError(t, servers.Set(ctx, i, slot, "rival", time.Minute))
	}
	require.ErrorIs(t, b.Release(ctx), core.ErrNotHeld)
	assert.Equal(t, repeat("rival", n), valuesOf(t, servers, slot), "release must not delete another holder's slot")
	for i := range n {
		require.NoError(t, servers.Del(ctx, i, slot))
	}
}

// permitTokensIncrease takes permits of a semaphore of three with
// fencing, holding up to three at once: each token is greater than every
// token before it, whichever slot it holds.
func permitTokensIncrease(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s, core.WithFencing(true))
	ctx, k := t.Context(), key(t)
	var last int64
	var held []*core.Lock
	for i := range 7 {
		if len(held) == 3 {
			require.NoError(t, held[0].Release(ctx))
			held = held[1:]
		}
		lock, err := l.TryAcquirePermit(ctx, k, 3)
		require.NoError(t, err, "acquisition %d", i)
		assert.Greater(t, lock.Token(), last, "acquisition %d", i)
		last = lock.Token()
		held = append(held, lock)
	}
	for _, lock := range held {
		require.NoError(t, lock.Release(ctx))
	}
}

// enqueueNeedsEverySlot checks the node's ScriptEnqueue with a
// semaphore's slots (the first slot, the queue, the other slots): it
// queues only while every slot is held, and a forced ticket always.
// It is a node check (kindScripts): it runs once, not at each point of
// the matrix.
func enqueueNeedsEverySlot(t *testing.T, h Harness) {
	servers := h.Shared(t, 1)
	n := servers.Nodes(t)[0]
	ctx, k := t.Context(), key(t)
	base, ok := driver.SemaphoreKey(k)
	require.True(t, ok)
	q, ok := driver.QueueKey(base)
	require.True(t, ok)
	slots := []string{permitKey(t, k, 0), permitKey(t, k, 1), permitKey(t, k, 2)}
	enqueue := func(ticket, mode string) any {
		r, err := n.Eval(ctx, driver.ScriptEnqueue.Source(), []string{slots[0], q, slots[1], slots[2]}, []string{ticket, "60000", mode})
		require.NoError(t, err)
		return r
	}
	for i, slot := range slots {
		assert.Equal(t, int64(0), enqueue("early", ""), "%d of 3 slots held: a permit is free, no one queues", i)
		require.NoError(t, servers.Set(ctx, 0, slot, "holder", time.Minute))
	}
	assert.Equal(t, int64(1), enqueue("me.1", ""), "every slot held: the waiter queues")
	require.NoError(t, servers.Del(ctx, 0, slots[1]))
	assert.Equal(t, int64(0), enqueue("me.2", ""), "a middle slot free: no one queues")
	assert.Equal(t, int64(1), enqueue("me.3", "force"), "a forced ticket is queued")
	for _, key := range append(slots, q) {
		require.NoError(t, servers.Del(ctx, 0, key))
	}
}

// takePermit takes the only permit of a semaphore of one on a new key,
// and returns it, a function counting the servers that hold it, and its
// slot key.
func takePermit(t *testing.T, l *core.Locker, servers Servers) (*core.Lock, func() int, []string) {
	t.Helper()
	k := key(t)
	lock, err := l.AcquirePermit(t.Context(), k, 1)
	require.NoError(t, err)
	slot := permitKey(t, k, 0)
	return lock, func() int { return holding(t, servers, slot, lock.Value()) }, []string{slot}
}

// holding counts the servers on which key holds value.
func holding(t *testing.T, servers Servers, key, value string) int {
	t.Helper()
	on := 0
	for _, v := range valuesOf(t, servers, key) {
		if v == value {
			on++
		}
	}
	return on
}
