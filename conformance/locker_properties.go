package conformance

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"
)

// runLockerProperties checks a Locker over n nodes of the backend.
func runLockerProperties(t *testing.T, h Harness, n int, s Strategy) {
	checks := []struct {
		name string
		fn   func(*testing.T, Harness, int, Strategy)
		min  int // smallest N the check makes sense for
	}{
		{"AcquireRelease", acquireRelease, 1},
		{"Inspect", inspect, 1},
		{"ContentionMajority", contentionMajority, 1},
		{"ContentionMinority", contentionMinority, 3},
		{"TwoLockersOneWinner", twoLockersOneWinner, 1},
		{"Exclusion", exclusion, 1},
		{"Extend", extend, 1},
		{"ReleaseTakenOver", releaseTakenOver, 1},
		{"CancelledAcquisitionLeavesNoKey", cancelledAcquisition, 1},
		{"MinorityDown", minorityDown, 3},
		{"MajorityDown", majorityDown, 1},
		{"PausedNodeDoesNotStall", pausedNode, 3},
		{"RestartedNode", restartedNode, 1},
	}
	for _, c := range checks {
		if n < c.min {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h, n, s)
		})
	}
}

func quorumOf(n int) int { return n/2 + 1 }

func asQuorumError(t *testing.T, err error) *core.QuorumError {
	t.Helper()
	var qe *core.QuorumError
	require.True(t, errors.As(err, &qe), "not a *core.QuorumError: %v", err)
	return qe
}

func acquireRelease(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	ctx, k := t.Context(), key(t)

	lock, err := l.Acquire(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, k, lock.Key())
	assert.Positive(t, lock.Validity())
	assert.LessOrEqual(t, lock.Validity(), l.TTL()-l.Drift())
	held := 0
	for i, v := range valuesOf(t, servers, k) {
		if v != "" {
			assert.Equal(t, lock.Value(), v, "server %d holds a value that is not the lock's", i)
			held++
		}
	}
	assert.GreaterOrEqual(t, held, quorumOf(n), "the lock must be on a quorum of servers")

	_, err = l.TryAcquire(ctx, k)
	require.ErrorIs(t, err, core.ErrNotAcquired, "a held lock cannot be taken again")

	require.NoError(t, lock.Release(ctx))
	assert.Equal(t, repeat("", n), valuesOf(t, servers, k), "release must clear every server")
	assert.Zero(t, lock.Validity())

	again, err := l.TryAcquire(ctx, k)
	require.NoError(t, err, "a released lock can be taken again")
	require.NoError(t, again.Release(ctx))
}

// inspect: Locker.Inspect reports a key absent, then held by the lock on a
// quorum with its TTL, then a value on one server alone, without expiry.
func inspect(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	ctx, k := t.Context(), key(t)

	st, err := l.Inspect(ctx, k)
	require.NoError(t, err)
	require.Len(t, st.Nodes, n)
	assert.False(t, st.Held())
	v, on, ttl := st.Holder()
	assert.Equal(t, []any{"", 0, time.Duration(0)}, []any{v, on, ttl}, "an absent key has no holder")
	for _, ns := range st.Nodes {
		assert.Equal(t, core.OutcomeOK, ns.Outcome, "%s: %v", ns.Node, ns.Err)
	}

	lock, err := l.Acquire(ctx, k)
	require.NoError(t, err)
	st, err = l.Inspect(ctx, k)
	require.NoError(t, err)
	assert.True(t, st.Held())
	v, on, ttl = st.Holder()
	assert.Equal(t, lock.Value(), v)
	assert.Equal(t, len(nonEmpty(valuesOf(t, servers, k))), on, "the holder is on every server that holds the lock")
	assert.Positive(t, ttl)
	assert.LessOrEqual(t, ttl, l.TTL())
	require.NoError(t, lock.Release(ctx))
	st, err = l.Inspect(ctx, k)
	require.NoError(t, err)
	assert.False(t, st.Held(), "released")

	require.NoError(t, servers.Set(ctx, 0, k, "rival", 0))
	st, err = l.Inspect(ctx, k)
	require.NoError(t, err)
	v, on, ttl = st.Holder()
	assert.Equal(t, []any{"rival", 1, time.Duration(-1)}, []any{v, on, ttl}, "one server, no expiry")
	assert.Equal(t, n == 1, st.Held(), "one server of %d is a quorum only alone", n)
	assert.Equal(t, "rival", st.Nodes[0].Value)
	require.NoError(t, servers.Del(ctx, 0, k))
}

func nonEmpty(values []string) []string {
	var out []string
	for _, v := range values {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

func contentionMajority(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	ctx, k := t.Context(), key(t)
	rivals := n - quorumOf(n) + 1
	for i := 0; i < rivals; i++ {
		require.NoError(t, servers.Set(ctx, i, k, "rival", time.Minute))
	}
	_, err := l.TryAcquire(ctx, k)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	assert.NotErrorIs(t, err, core.ErrUnavailable, "contention is not an outage")
	qe := asQuorumError(t, err)
	require.Len(t, qe.Nodes, n)
	for i := 0; i < rivals; i++ {
		o := qe.Nodes[i].Outcome
		assert.Contains(t, []core.Outcome{core.OutcomeRefused, core.OutcomeNotTried, core.OutcomeCanceled}, o, "server %d holds a rival", i)
	}
	want := repeat("", n)
	for i := 0; i < rivals; i++ {
		want[i] = "rival"
	}
	assert.Equal(t, want, valuesOf(t, servers, k), "rivals untouched, our attempt cleaned up")
}

func contentionMinority(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	ctx, k := t.Context(), key(t)
	for i := 0; i < n-quorumOf(n); i++ {
		require.NoError(t, servers.Set(ctx, i, k, "rival", time.Minute))
	}
	lock, err := l.TryAcquire(ctx, k)
	require.NoError(t, err, "a minority of rivals cannot block a quorum")
	require.NoError(t, lock.Release(ctx))
	for i, v := range valuesOf(t, servers, k) {
		if i < n-quorumOf(n) {
			assert.Equal(t, "rival", v)
		} else {
			assert.Empty(t, v)
		}
	}
}

func twoLockersOneWinner(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	a := newLocker(t, servers.Nodes(t), s)
	b := newLocker(t, servers.Nodes(t), s)
	ctx := t.Context()
	for round := 0; round < 20; round++ {
		k := key(t) + ":" + strconv.Itoa(round)
		var wg sync.WaitGroup
		locks := make([]*core.Lock, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i, l := range []*core.Locker{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				locks[i], errs[i] = l.TryAcquire(ctx, k)
			}()
		}
		close(start)
		wg.Wait()
		winners := 0
		for i := range locks {
			if errs[i] == nil {
				winners++
				require.NoError(t, locks[i].Release(ctx))
			} else {
				require.ErrorIs(t, errs[i], core.ErrNotAcquired)
			}
		}
		require.LessOrEqual(t, winners, 1, "two lockers held one key at once")
	}
}

func exclusion(t *testing.T, h Harness, n int, s Strategy) {
	const goroutines, increments = 8, 15
	counterRace(t, h, n, s, goroutines, increments)
}

func mutualExclusion(t *testing.T, h Harness, s Strategy, goroutines, increments int) {
	counterRace(t, h, 3, s, goroutines, increments)
}

// counterRace has goroutines increment a counter held on server 0 with a
// read-modify-write that is atomic only under the lock: any overlap of two
// holders loses an update and the final count comes out short.
func counterRace(t *testing.T, h Harness, n int, s Strategy, goroutines, increments int) {
	servers := h.Shared(t, n)
	// Longer waits than the other tests: with many contenders, short ones
	// burn the CPU on rounds that cannot win (measured: 10-50 ms gives four
	// times the acquisitions per second of 2-10 ms under the race detector).
	l := newLocker(t, servers.Nodes(t), s, core.WithTries(1_000_000),
		core.WithRetryDelay(strategies.JitterDelay(10*time.Millisecond, 50*time.Millisecond)))
	ctx, k := t.Context(), key(t)
	counter := k + ":counter"
	require.NoError(t, servers.Set(ctx, 0, counter, "0", 0))
	var (
		wg     sync.WaitGroup
		inside atomic.Int32
		failed atomic.Bool
	)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < increments && !failed.Load(); i++ {
				lock, err := l.Acquire(ctx, k)
				if !assert.NoError(t, err) {
					failed.Store(true)
					return
				}
				if inside.Add(1) != 1 {
					t.Error("two holders inside the critical section")
				}
				v, _, _, err := servers.Get(ctx, 0, counter)
				if assert.NoError(t, err) {
					c, _ := strconv.Atoi(v)
					assert.NoError(t, servers.Set(ctx, 0, counter, strconv.Itoa(c+1), 0))
				}
				inside.Add(-1)
				assert.NoError(t, lock.Release(ctx))
			}
		}()
	}
	wg.Wait()
	v, _, _, err := servers.Get(ctx, 0, counter)
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(goroutines*increments), v, "lost updates: two holders overlapped")
}

func extend(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	const ttl = 3 * time.Second
	l := newLocker(t, servers.Nodes(t), s, core.WithTTL(ttl))
	ctx, k := t.Context(), key(t)
	lock, err := l.TryAcquire(ctx, k)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		// Shorten the key's life on every server, as time passing would.
		if v, _, ok, err := servers.Get(ctx, i, k); err == nil && ok {
			require.NoError(t, servers.Set(ctx, i, k, v, time.Second))
		}
	}
	before := lock.Validity()
	require.NoError(t, lock.Extend(ctx))
	assert.GreaterOrEqual(t, lock.Validity(), before-50*time.Millisecond)
	assert.LessOrEqual(t, lock.Validity(), ttl-l.Drift())
	extended := 0
	for i := 0; i < n; i++ {
		v, left, ok, err := servers.Get(ctx, i, k)
		require.NoError(t, err)
		if ok && v == lock.Value() && left > 2*time.Second {
			extended++
		}
	}
	assert.GreaterOrEqual(t, extended, quorumOf(n), "the TTL must be reset on a quorum of servers")

	// Another owner takes the key on a quorum (our keys expired there).
	for i := 0; i < quorumOf(n); i++ {
		require.NoError(t, servers.Set(ctx, i, k, "rival", time.Minute))
	}
	err = lock.Extend(ctx)
	require.ErrorIs(t, err, core.ErrLockLost)
	assert.Zero(t, lock.Validity())
	for i := 0; i < quorumOf(n); i++ {
		v, left, _, err := servers.Get(ctx, i, k)
		require.NoError(t, err)
		assert.Equal(t, "rival", v)
		assert.Greater(t, left, 50*time.Second, "the rival's TTL must not change")
	}
	require.ErrorIs(t, lock.Release(ctx), core.ErrNotHeld)
}

func releaseTakenOver(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	ctx, k := t.Context(), key(t)
	lock, err := l.TryAcquire(ctx, k)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		require.NoError(t, servers.Set(ctx, i, k, "rival", time.Minute))
	}
	err = lock.Release(ctx)
	require.ErrorIs(t, err, core.ErrNotHeld)
	assert.Equal(t, repeat("rival", n), valuesOf(t, servers, k), "release must not delete another owner's key")
	require.NoError(t, lock.Release(ctx), "a second release is a no-op")
}

// cancelAfterSet is a node whose SetNX (or acquisition script) cancels the caller's context once it
// has answered: a cancellation that arrives mid-round, deterministically.
type cancelAfterSet struct {
	core.Node
	cancel context.CancelFunc
}

func (c cancelAfterSet) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	ok, err := c.Node.SetNX(ctx, key, value, ttl)
	c.cancel()
	return ok, err
}

func (c cancelAfterSet) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	reply, err := c.Node.EvalSHA(ctx, sha, keys, args)
	if driver.IsAcquisition(sha, "") {
		c.cancel()
	}
	return reply, err
}

func (c cancelAfterSet) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	reply, err := c.Node.Eval(ctx, script, keys, args)
	if driver.IsAcquisition("", script) {
		c.cancel()
	}
	return reply, err
}

func cancelledAcquisition(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	nodes := servers.Nodes(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Server 0 sets the key, then the caller gives up.
	nodes[0] = cancelAfterSet{Node: nodes[0], cancel: cancel}
	l := newLocker(t, nodes, s)
	k := key(t)
	lock, err := l.Acquire(ctx, k)
	if err == nil {
		// With one node, or when every node answered before the
		// cancellation was seen, the lock was won: it must be a real one.
		require.NoError(t, lock.Release(context.Background()))
	} else {
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, core.ErrNotAcquired)
	}
	assert.Equal(t, repeat("", n), valuesOf(t, servers, k), "no key of a finished acquisition may remain")
	if n > 1 && s.Name == "sequential" {
		require.Error(t, err, "a sequential round sees the cancellation before server 1")
	}
}

func minorityDown(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Isolated(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	down := n - quorumOf(n)
	for i := n - down; i < n; i++ {
		require.NoError(t, servers.Stop(i))
	}
	ctx, k := t.Context(), key(t)
	lock, err := l.Acquire(ctx, k)
	require.NoError(t, err, "%d of %d servers down leaves a quorum", down, n)
	require.NoError(t, lock.Extend(ctx))
	require.NoError(t, lock.Release(ctx), "the release reaches a quorum")
	for i := 0; i < n-down; i++ {
		_, _, found, err := servers.Get(ctx, i, k)
		require.NoError(t, err)
		assert.False(t, found)
	}
}

func majorityDown(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Isolated(t, n)
	const tries = 3
	l := newLocker(t, servers.Nodes(t), s, core.WithTries(tries))
	down := n - quorumOf(n) + 1
	for i := 0; i < down; i++ {
		require.NoError(t, servers.Stop(i))
	}
	ctx, k := t.Context(), key(t)
	start := time.Now()
	_, err := l.Acquire(ctx, k)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, core.ErrUnavailable)
	assert.NotErrorIs(t, err, core.ErrNotAcquired, "an outage is not contention")
	// Each try is one round plus one clean-up, each bounded by the node
	// timeout, plus the waits between tries.
	assert.Less(t, elapsed, tries*(2*testNodeTimeout+testRetryMax), "the outage error must come within twice the node timeout per try")
	qe := asQuorumError(t, err)
	assert.Equal(t, tries, qe.Tries)
	_, err = l.Inspect(ctx, k)
	require.ErrorIs(t, err, core.ErrUnavailable, "with a majority down, whether the key is held is unknown")
	_, _, failed := qe.Counts()
	assert.GreaterOrEqual(t, failed, n-quorumOf(n)+1)
	for _, r := range qe.Nodes[:down] {
		if r.Outcome == core.OutcomeFailed {
			assert.Error(t, r.Err, "a failed node carries its error")
		}
	}
}

func pausedNode(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Isolated(t, n)
	const timeout = 200 * time.Millisecond
	l := newLocker(t, servers.Nodes(t), s, core.WithNodeTimeout(timeout))
	ctx, k := t.Context(), key(t)
	require.NoError(t, servers.Pause(0))
	resumed := false
	defer func() {
		if !resumed {
			assert.NoError(t, servers.Resume(0))
		}
	}()
	var lock *core.Lock
	start := time.Now()
	err := returnsWithin(t, 10*time.Second, func() (err error) {
		lock, err = l.Acquire(ctx, k)
		return err
	})
	require.NoError(t, err, "one paused server must not prevent a quorum")
	// The bound leaves room for a busy machine under -race (a CI run took
	// 1.007 s over three clusters); a stall is a driver's dial timeout,
	// seconds more.
	assert.Less(t, time.Since(start), 3*timeout+time.Second, "a paused server may cost one node timeout, not a stall")
	start = time.Now()
	require.NoError(t, returnsWithin(t, 10*time.Second, func() error { return lock.Release(ctx) }))
	assert.Less(t, time.Since(start), 3*timeout+time.Second, "release must not wait for the paused server")
	require.NoError(t, servers.Resume(0))
	resumed = true
}

func restartedNode(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Isolated(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	ctx := t.Context()
	lock, err := l.Acquire(ctx, key(t))
	require.NoError(t, err)
	require.NoError(t, lock.Release(ctx))
	// A restart without persistence forgets keys and cached scripts; the
	// clients must reconnect and the scripts be sent again.
	require.NoError(t, servers.Stop(n-1))
	require.NoError(t, servers.Start(n-1))
	lock, err = l.Acquire(ctx, key(t))
	require.NoError(t, err, "the Locker must recover from a restarted server")
	require.NoError(t, lock.Extend(ctx))
	require.NoError(t, lock.Release(ctx))
	assert.Equal(t, repeat("", n), valuesOf(t, servers, lock.Key()))
}

// Sharded forwards driver.Sharded, so that the restart guard sees the node
// it wraps as it is.
func (c cancelAfterSet) Sharded() bool {
	s, ok := c.Node.(driver.Sharded)
	return ok && s.Sharded()
}
