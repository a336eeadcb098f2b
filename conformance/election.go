package conformance

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
)

// runElection checks leader election (Locker.Campaign, Leader, Observe)
// over n nodes of the backend: a resignation hands the lead to the next
// candidate with a greater term, which observers see, and at most one
// leader at a time under contention, its terms increasing.
func runElection(t *testing.T, h Harness, n int, s Strategy) {
	runKindChecks(t, h, n, s, []kindCheck{
		{"ResignHandsOver", resignHandsOver, false},
		{"OneLeaderAtATime", oneLeaderAtATime, true},
	})
}

// runElectionKind runs the Election group: runElection at each point of
// cfg's matrix, and a leader's loss once: its key deleted from a
// majority, and a majority of its servers gone, each ending its context
// with lead time.
func runElectionKind(t *testing.T, h Harness, cfg runConfig) {
	runMatrix(t, h, cfg, runElection)
	t.Run("DeletedKeyEndsLeadership", func(t *testing.T) {
		t.Parallel()
		deletedLeaderKey(t, h)
	})
	t.Run("MajorityGoneEndsLeadershipEarly", func(t *testing.T) {
		t.Parallel()
		leaderAtRisk(t, h)
	})
}

// nextLeader reads ch until it sends a leader that is not skip (the zero
// Leader in between, a resignation, is skipped too), within bound.
func nextLeader(t *testing.T, ch <-chan core.Leader, skip core.Leader, bound time.Duration) core.Leader {
	t.Helper()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		select {
		case got, ok := <-ch:
			require.True(t, ok, "Observe's channel closed")
			if got != skip && got != (core.Leader{}) {
				return got
			}
		case <-timer.C:
			require.FailNow(t, "no new leader observed", "within %v", bound)
		}
	}
}

// resignHandsOver has candidate A lead, B campaign behind it, and an
// observer on a third Locker: B must not lead while A does, must lead
// once A resigns, with a greater term, and the observer sees A then B,
// well within the poll (a minute's TTL polls every 15 s): by notices.
func resignHandsOver(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	opts := []core.Option{core.WithTTL(time.Minute)}
	la := newLocker(t, servers.Nodes(t), s, opts...)
	lb := newLocker(t, servers.Nodes(t), s, append(opts, core.WithTries(1_000_000))...)
	lo := newLocker(t, servers.Nodes(t), s, opts...)
	ctx, k := t.Context(), key(t)

	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen, err := lo.Observe(octx, k)
	require.NoError(t, err)
	assert.Equal(t, core.Leader{}, <-seen, "nobody leads at first")

	a, err := la.Campaign(ctx, k, "candidate-a")
	require.NoError(t, err)
	assert.Positive(t, a.Token(), "a term without WithFencing")
	lead := core.Leader{Value: "candidate-a", Term: a.Token()}
	assert.Equal(t, lead, nextLeader(t, seen, core.Leader{}, 5*time.Second))
	got, err := lo.Leader(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, lead, got)

	won := make(chan *core.Lock, 1)
	go func() {
		b, err := lb.Campaign(ctx, k, "candidate-b")
		assert.NoError(t, err)
		won <- b
	}()
	// B makes rounds and waits; it must not lead while A holds the lead.
	time.Sleep(200 * time.Millisecond)
	select {
	case <-won:
		t.Fatal("B leads while A leads")
	default:
	}
	resigned := time.Now()
	require.NoError(t, a.Release(ctx))
	var b *core.Lock
	select {
	case b = <-won:
	case <-time.After(10 * time.Second):
		t.Fatal("B did not lead within 10 s of A's resignation")
	}
	require.NotNil(t, b)
	assert.Greater(t, b.Token(), a.Token(), "the next term is greater")
	assert.Equal(t, core.Leader{Value: "candidate-b", Term: b.Token()}, nextLeader(t, seen, lead, 5*time.Second))
	assert.Less(t, time.Since(resigned), 10*time.Second, "seen by notices, not the 15 s poll")
	require.NoError(t, b.Release(ctx))
	stop()
	for range seen { // closed once its context ends
	}
}

// oneLeaderAtATime has candidates on three Lockers campaign over and over:
// inside its term each marks itself leader, records its term, extends
// (a round trip) and steps down. Two leaders at once, or a term not
// greater than the one before it, is a violation.
func oneLeaderAtATime(t *testing.T, h Harness, n int, s Strategy) {
	const terms = 6
	servers := h.Shared(t, n)
	lockers := contenders(t, servers, s, 3)
	ctx, k := t.Context(), key(t)
	var (
		inside     atomic.Int64
		violations atomic.Int64
		mu         sync.Mutex
		order      []int64
		wg         sync.WaitGroup
	)
	for g := range 6 {
		l := lockers[g%len(lockers)]
		wg.Go(func() {
			for range terms {
				lead, err := l.Campaign(ctx, k, fmt.Sprintf("candidate-%d", g))
				if !assert.NoError(t, err) {
					return
				}
				if inside.Add(1) != 1 {
					violations.Add(1)
				}
				mu.Lock()
				order = append(order, lead.Token())
				mu.Unlock()
				assert.NoError(t, lead.Extend(ctx), "a leader extends")
				inside.Add(-1)
				assert.NoError(t, lead.Release(ctx))
			}
		})
	}
	wg.Wait()
	assert.Zero(t, violations.Load(), "two leaders at once")
	require.Len(t, order, 6*terms)
	for i := 1; i < len(order); i++ {
		assert.Greater(t, order[i], order[i-1], "term %d follows term %d", order[i], order[i-1])
	}
}

// deletedLeaderKey deletes a leader's key from a majority: its next
// extension finds it gone and ends its context, and an observer sees
// nobody lead within the poll (TTL/4: a deletion sends no notice).
func deletedLeaderKey(t *testing.T, h Harness) {
	servers := h.Shared(t, 3)
	const ttl, interval = 1500 * time.Millisecond, 300 * time.Millisecond
	l := newLocker(t, servers.Nodes(t), parallel, core.WithTTL(ttl), core.WithKeepAlive(interval))
	ctx, k := t.Context(), key(t)
	lead, err := l.Campaign(ctx, k, "leader")
	require.NoError(t, err)
	lctx, cancel := lead.Context(ctx)
	defer cancel()
	seen, err := l.Observe(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, "leader", (<-seen).Value)

	for i := range quorumOf(3) {
		require.NoError(t, servers.Del(ctx, i, k))
	}
	deleted := time.Now()
	select {
	case <-lctx.Done():
	case <-time.After(ttl + time.Second):
		t.Fatalf("the leader's context still live %v after its key was deleted from a majority", ttl+time.Second)
	}
	assert.Less(t, time.Since(deleted), interval+testNodeTimeout+400*time.Millisecond, "found by the next extension")
	require.ErrorIs(t, context.Cause(lctx), core.ErrLockLost)
	select {
	case got := <-seen:
		assert.Equal(t, core.Leader{}, got, "nobody leads")
	case <-time.After(ttl/4 + time.Second):
		t.Fatal("the observer did not see the leader gone within the poll")
	}
	_ = lead.Release(ctx) // what is left of it; its error is not the point
}

// leaderAtRisk stops two of three servers under a leader: no extension
// reaches a quorum, so its context must end while its term is still valid,
// the at-risk margin before the end: lead time to stop acting as leader.
func leaderAtRisk(t *testing.T, h Harness) {
	servers := h.Isolated(t, 3)
	const ttl = 2 * time.Second
	l := newLocker(t, servers.Nodes(t), parallel, core.WithTTL(ttl))
	ctx, k := t.Context(), key(t)
	lead, err := l.Campaign(ctx, k, "leader")
	require.NoError(t, err)
	lctx, cancel := lead.Context(ctx)
	defer cancel()
	require.NoError(t, servers.Stop(0))
	require.NoError(t, servers.Stop(1))
	stopped := time.Now()
	select {
	case <-lctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the leader's context still live 5 s after a majority of servers stopped")
	}
	margin := ttl / core.DefaultAtRiskDivisor
	assert.LessOrEqual(t, time.Since(stopped), ttl-margin/2, "with time left to stop")
	cause := context.Cause(lctx)
	assert.ErrorIs(t, cause, core.ErrLockAtRisk)
	assert.NotErrorIs(t, cause, core.ErrValidityExpired, "the notice comes before the term's validity ends")
	_ = lead.Release(ctx)
}
