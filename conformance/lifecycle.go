package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/internal/countnode"
	"github.com/quorumlock/quorumlock/strategies"
)

// parallel is the strategy of the groups that are not about strategies.
var parallel = Strategy{"parallel", func() strategies.Strategy { return strategies.Parallel() }}

// runLifecycle checks a lock's life after acquisition on real servers:
// the keep-alive, the notice of its end (Done, Err, Context, Do's
// context), and the hand-off to a waiter on release.
func runLifecycle(t *testing.T, h Harness) {
	checks := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"KeptAliveSurvives", keptAliveSurvives},
		{"MajorityStoppedCancelsWithin1TTL", majorityStoppedCancels},
		{"DeletedKeyLostAtNextExtension", deletedKeyLost},
		{"ReleaseStopsKeepAlive", releaseStopsKeepAlive},
		{"WakeOnRelease", wakeOnRelease},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

// keptAliveSurvives holds a lock with Do for three TTLs: the keep-alive
// must extend it in time, every time, so that the same value stays on a
// quorum of servers and fn's context never ends; Do then releases it.
func keptAliveSurvives(t *testing.T, h Harness) {
	servers := h.Shared(t, 3)
	const ttl = time.Second
	// An extension every 200 ms, each within 150 ms: a machine must stall
	// the keeper for most of a TTL, not a third of one, to end the lock
	// (the 500 ms form lost a run under load).
	l := newLocker(t, servers.Nodes(t), parallel, core.WithTTL(ttl), core.WithKeepAlive(200*time.Millisecond),
		core.WithNodeTimeout(150*time.Millisecond))
	ctx, k := t.Context(), key(t)

	var value string
	checks := 0
	err := l.Do(ctx, k, func(ctx context.Context) error {
		end := time.NewTimer(3 * ttl)
		defer end.Stop()
		tick := time.NewTicker(ttl / 5)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return fmt.Errorf("fn's context ended while the lock was kept alive: %w", context.Cause(ctx))
			case <-end.C:
				if ctx.Err() != nil {
					return fmt.Errorf("fn's context ended while the lock was kept alive: %w", context.Cause(ctx))
				}
				return nil
			case <-tick.C:
				held := map[string]int{}
				for _, v := range valuesOf(t, servers, k) {
					if v != "" {
						held[v]++
					}
				}
				assert.Len(t, held, 1, "one value of the lock on the servers: %v", held)
				for v, n := range held {
					assert.GreaterOrEqual(t, n, quorumOf(3), "the lock must stay on a quorum: %v", held)
					if value == "" {
						value = v
					}
					assert.Equal(t, value, v, "the lock's value changed on the servers")
				}
				checks++
			}
		}
	})
	require.NoError(t, err, "Do over a kept-alive lock")
	assert.GreaterOrEqual(t, checks, 10, "the servers were checked while fn ran")
	// 3 s of holding at one extension per 200 ms.
	assert.GreaterOrEqual(t, l.Stats().RenewalTicks, uint64(10), "renewals while fn ran")
	assert.Equal(t, repeat("", 3), valuesOf(t, servers, k), "Do must release the lock")
	assert.Zero(t, l.Stats().KeptAlive)
}

// majorityStoppedCancels stops two of three servers while Do's fn holds
// the lock: no extension can reach a quorum, so fn's context must end
// while the lock is still valid, the at-risk margin (TTL/5) before its
// validity runs out, with a cause saying the lock is at risk for want of
// a quorum; Do reports it.
func majorityStoppedCancels(t *testing.T, h Harness) {
	servers := h.Isolated(t, 3)
	const ttl = 2 * time.Second
	l := newLocker(t, servers.Nodes(t), parallel, core.WithTTL(ttl))
	ctx, k := t.Context(), key(t)

	var elapsed time.Duration
	var cause error
	err := l.Do(ctx, k, func(ctx context.Context) error {
		require.NoError(t, servers.Stop(0))
		require.NoError(t, servers.Stop(1))
		stopped := time.Now()
		bound := time.NewTimer(5 * time.Second)
		defer bound.Stop()
		select {
		case <-ctx.Done():
			elapsed, cause = time.Since(stopped), context.Cause(ctx)
			return nil
		case <-bound.C:
			return errors.New("fn's context still live 5 s after a majority of servers stopped")
		}
	})
	require.NotNil(t, cause, "fn's context must end: %v", err)
	// At TTL - drift - TTL/5 after the acquisition at the latest; half the
	// margin is room for a loaded machine.
	margin := ttl / core.DefaultAtRiskDivisor
	assert.LessOrEqual(t, elapsed, ttl-margin/2, "fn's context must end with time left to stop")
	assert.ErrorIs(t, cause, core.ErrLockAtRisk)
	assert.ErrorIs(t, cause, core.ErrLockLost)
	assert.NotErrorIs(t, cause, core.ErrValidityExpired, "the notice comes before the validity ends")
	assert.ErrorIs(t, cause, core.ErrUnavailable, "the cause must say that no quorum could be reached")
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrLockLost, "Do must report the lost lock")
}

// deletedKeyLost deletes a kept-alive lock's key from every server: the
// next extension is refused by all of them, which ends the lock at once,
// long before its validity would have run out.
func deletedKeyLost(t *testing.T, h Harness) {
	servers := h.Shared(t, 3)
	const ttl, interval = 1500 * time.Millisecond, 300 * time.Millisecond
	l := newLocker(t, servers.Nodes(t), parallel, core.WithTTL(ttl), core.WithKeepAlive(interval))
	ctx, k := t.Context(), key(t)
	lock, err := l.Acquire(ctx, k)
	require.NoError(t, err)
	require.NoError(t, lock.KeepAlive())
	require.NoError(t, lock.Err())

	for i := range servers.Len() {
		require.NoError(t, servers.Del(ctx, i, k))
	}
	deleted := time.Now()
	bound := time.NewTimer(ttl + time.Second)
	defer bound.Stop()
	select {
	case <-lock.Done():
	case <-bound.C:
		t.Fatalf("Done still open %v after the key was deleted", ttl+time.Second)
	}
	elapsed := time.Since(deleted)
	// One interval until the extension, one node timeout for it, and room
	// for a loaded machine; the validity alone would last 1.48 s.
	assert.Less(t, elapsed, interval+testNodeTimeout+400*time.Millisecond, "the loss must be found by the next extension")
	err = lock.Err()
	require.ErrorIs(t, err, core.ErrLockLost)
	assert.NotErrorIs(t, err, core.ErrValidityExpired, "the extension found the key gone, before the validity ran out")
	var qe *core.QuorumError
	if assert.ErrorAs(t, err, &qe, "the cause carries the refused extension") {
		assert.Equal(t, core.OpExtend, qe.Op)
		_, refused, _ := qe.Counts()
		assert.GreaterOrEqual(t, refused, quorumOf(3))
	}
	assert.Zero(t, lock.Validity())

	rival := newLocker(t, servers.Nodes(t), parallel)
	taken, err := rival.TryAcquire(ctx, k)
	require.NoError(t, err, "a lost lock's key is free")
	require.NoError(t, taken.Release(ctx))
	assert.ErrorIs(t, lock.Release(ctx), core.ErrNotHeld)
}

// releaseStopsKeepAlive releases a kept-alive lock: it ends at once with
// ErrReleased, cannot be extended or kept alive again, no renewal follows,
// and the key is free for a rival, whose lock is left alone.
func releaseStopsKeepAlive(t *testing.T, h Harness) {
	servers := h.Shared(t, 3)
	const ttl, interval = time.Second, 100 * time.Millisecond
	l := newLocker(t, servers.Nodes(t), parallel, core.WithTTL(ttl), core.WithKeepAlive(interval))
	ctx, k := t.Context(), key(t)
	lock, err := l.Acquire(ctx, k)
	require.NoError(t, err)
	require.NoError(t, lock.KeepAlive())
	require.Eventually(t, func() bool { return l.Stats().RenewalTicks >= 2 }, 5*time.Second, 10*time.Millisecond,
		"the keep-alive extends the lock")
	require.NoError(t, lock.Err(), "renewals keep the lock")

	require.NoError(t, lock.Release(ctx))
	select {
	case <-lock.Done():
	default:
		t.Fatal("Done must be closed when Release returns")
	}
	assert.ErrorIs(t, lock.Err(), core.ErrReleased)
	assert.ErrorIs(t, lock.Extend(ctx), core.ErrNotHeld)
	assert.ErrorIs(t, lock.KeepAlive(), core.ErrNotHeld)
	assert.Zero(t, l.Stats().KeptAlive)
	assert.Equal(t, repeat("", 3), valuesOf(t, servers, k))

	rival := newLocker(t, servers.Nodes(t), parallel)
	taken, err := rival.TryAcquire(ctx, k)
	require.NoError(t, err, "a released lock's key is free")
	ticks := l.Stats().RenewalTicks
	require.Never(t, func() bool { return l.Stats().RenewalTicks != ticks }, 5*interval, interval/5,
		"no renewal after the release")
	assert.Equal(t, repeat(taken.Value(), 3), valuesOf(t, servers, k), "the rival's lock is untouched")
	require.NoError(t, taken.Release(ctx))
}

// wakeOnRelease has a waiter in Acquire, with a long retry delay, lose to
// a holder; the holder releases. Over nodes that are all core.Watchers the
// waiter must wake on the release notice, long before its retry delay;
// over others it still acquires, after the delay.
func wakeOnRelease(t *testing.T, h Harness) {
	servers := h.Shared(t, 3)
	ctx, k := t.Context(), key(t)
	holder := newLocker(t, servers.Nodes(t), parallel)
	lock, err := holder.Acquire(ctx, k)
	require.NoError(t, err)

	nodes, counts, watchers := countedNodes(servers.Nodes(t))
	delay, rounds := 5*time.Second, int64(2)
	if !watchers {
		// Polling only: the waiter acquires after its delay.
		delay, rounds = 500*time.Millisecond, 1
	}
	t.Logf("every node a driver.Watcher: %t", watchers)
	waiter := newLocker(t, nodes, parallel, core.WithRetryDelay(strategies.JitterDelay(delay, delay)), core.WithTries(100))

	done := make(chan acquired, 1)
	go func() {
		lock, err := waiter.Acquire(ctx, k)
		done <- acquired{lock, err, time.Now()}
	}()
	// With release notices the waiter queues a ticket once subscribed and
	// makes its second round after its retry delay; the release comes as
	// that round begins, so its notice can reach the waiter mid-round and
	// before the other nodes are free. Without, it waits after its first
	// round.
	require.Eventually(t, func() bool { return counts[0].Acquires.Load() >= rounds }, 10*time.Second, 2*time.Millisecond,
		"the waiter tries and loses")
	select {
	case r := <-done:
		t.Fatalf("the waiter returned while the lock was held: %v", r.err)
	default:
	}
	require.NoError(t, lock.Release(ctx))
	released := time.Now()

	bound := time.NewTimer(delay + 5*time.Second)
	defer bound.Stop()
	var r acquired
	select {
	case r = <-done:
	case <-bound.C:
		t.Fatalf("the waiter did not acquire within %v of the release", delay+5*time.Second)
	}
	require.NoError(t, r.err, "the waiter acquires once the holder has released")
	wait := r.at.Sub(released)
	t.Logf("waiter acquired %v after the release", wait)
	if watchers {
		assert.Less(t, wait, 2*time.Second, "a waiter over Watchers must wake on the release, not after its %v retry delay", delay)
	}
	require.NoError(t, r.lock.Release(ctx))
}

// acquired is what an Acquire on another goroutine returned, and when.
type acquired struct {
	lock *core.Lock
	err  error
	at   time.Time
}

// countedNodes wraps each node to count its calls, in place, and reports
// whether every node is a driver.Watcher.
func countedNodes(nodes []core.Node) ([]core.Node, []*countnode.Counts, bool) {
	watchers := true
	counts := make([]*countnode.Counts, len(nodes))
	for i, n := range nodes {
		if _, ok := n.(driver.Watcher); !ok {
			watchers = false
		}
		nodes[i], counts[i] = countnode.Wrap(n)
	}
	return nodes, counts, watchers
}
