package conformance

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// healthTimeout is the node timeout of the node-health tests: long enough
// that a round which waited for a hung node is told apart from one that
// did not on a busy machine.
const healthTimeout = 500 * time.Millisecond

// runNodeHealth checks what a hung or dead minority costs once noticed,
// and the hand-off with the herald down.
func runNodeHealth(t *testing.T, h Harness) {
	t.Run("HungNodeCostsOneTimeout", func(t *testing.T) {
		t.Parallel()
		hungNodeCostsOneTimeout(t, h)
	})
	t.Run("ReleaseAfterTheSetItUndoes", func(t *testing.T) {
		t.Parallel()
		releaseAfterTheSetItUndoes(t, h)
	})
	t.Run("ReleasesToANodeHangingNow", func(t *testing.T) {
		t.Parallel()
		releasesToANodeHangingNow(t, h)
	})
	t.Run("HealLeavesNoKey", func(t *testing.T) {
		t.Parallel()
		healLeavesNoKey(t, h)
	})
	for _, fault := range []string{"dead", "hung"} {
		t.Run("HandOffWithHeraldDown/"+fault, func(t *testing.T) {
			t.Parallel()
			handOffWithHeraldDown(t, h, fault)
		})
	}
}

// events records an Observer's events.
type events struct {
	mu  sync.Mutex
	all []core.Event
}

func (e *events) Observe(_ context.Context, ev core.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

// last returns the last event of kind.
func (e *events) last(kind core.Op) core.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.all) - 1; i >= 0; i-- {
		if e.all[i].Kind == kind {
			return e.all[i]
		}
	}
	return core.Event{}
}

// healthLocker makes a Locker over nodes for the node-health tests.
func healthLocker(t *testing.T, nodes []core.Node, opts ...core.Option) *core.Locker {
	t.Helper()
	return newLocker(t, nodes, Strategy{Name: "parallel", New: func() strategies.Strategy { return strategies.Parallel() }},
		append([]core.Option{core.WithNodeTimeout(healthTimeout)}, opts...)...)
}

// waitHealthy waits until l has no suspect node, or fails the test.
func waitHealthy(t *testing.T, l *core.Locker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*healthTimeout)
	defer cancel()
	tick := time.NewTicker(healthTimeout / 10)
	defer tick.Stop()
	for len(l.Stats().Suspect) > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			require.Empty(t, l.Stats().Suspect, "a node that answers again rejoins")
		}
	}
}

// hungNodeCostsOneTimeout: a hung node costs the round that finds it one
// node timeout; later rounds do not wait for it; it rejoins once it answers.
func hungNodeCostsOneTimeout(t *testing.T, h Harness) {
	servers := h.Isolated(t, 3)
	obs := &events{}
	nodes := servers.Nodes(t)
	name := nodes[0].String()
	l := healthLocker(t, nodes, core.WithObserver(obs))
	ctx := t.Context()
	k := key(t)
	require.NoError(t, servers.Pause(0))
	resumed := false
	defer func() {
		if !resumed {
			_ = servers.Resume(0)
		}
	}()

	lock, err := l.Acquire(ctx, k)
	require.NoError(t, err, "a quorum of the others")
	first := obs.last(core.OpAcquire)
	require.Len(t, first.Nodes, 3)
	assert.ErrorIs(t, first.Nodes[0].Err, core.ErrNodeTimeout, "the round that finds it hung waits one node timeout")
	assert.GreaterOrEqual(t, first.Duration, healthTimeout)
	require.NoError(t, lock.Release(ctx))
	assert.Equal(t, []string{name}, l.Stats().Suspect)
	// Probes, one per node timeout, find it still hung: it stays suspect.
	tick := time.NewTicker(healthTimeout / 5)
	defer tick.Stop()
	for range 20 { // four probes
		<-tick.C
		require.Equal(t, []string{name}, l.Stats().Suspect, "a hung node stays suspect")
	}

	for range 3 {
		lock, err = l.Acquire(ctx, k)
		require.NoError(t, err)
		ev := obs.last(core.OpAcquire)
		assert.ErrorIs(t, ev.Nodes[0].Err, core.ErrNodeSuspect, "not waited for")
		assert.Less(t, ev.Duration, healthTimeout, "a suspect node costs no timeout")
		require.NoError(t, lock.Release(ctx))
		assert.Less(t, obs.last(core.OpRelease).Duration, healthTimeout, "nor does its release")
	}

	require.NoError(t, servers.Resume(0))
	resumed = true
	waitHealthy(t, l)
	lock, err = l.Acquire(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeOK, obs.last(core.OpAcquire).Nodes[0].Outcome, "it votes again")
	require.NoError(t, lock.Release(ctx))
}

// releaseAfterTheSetItUndoes: a lock whose SET to a suspect node is still
// in flight when it is released has its release sent after that SET, so
// nothing is left on the node once it answers.
func releaseAfterTheSetItUndoes(t *testing.T, h Harness) {
	servers := h.Isolated(t, 3)
	l := healthLocker(t, servers.Nodes(t))
	ctx := t.Context()
	require.NoError(t, servers.Pause(0))
	resumed := false
	defer func() {
		if !resumed {
			_ = servers.Resume(0)
		}
	}()
	first, err := l.Acquire(ctx, key(t)+"-first") // finds node 0 hung
	require.NoError(t, err)
	require.NoError(t, first.Release(ctx))

	var keys []string
	for i := range 3 { // each SET to node 0 waits in its socket
		k := key(t) + "-" + string(rune('a'+i))
		keys = append(keys, k)
		lock, err := l.Acquire(ctx, k)
		require.NoError(t, err)
		require.NoError(t, lock.Release(ctx), "without waiting for node 0")
	}
	require.NoError(t, servers.Resume(0))
	resumed = true
	waitHealthy(t, l)
	require.NoError(t, l.Close()) // waits for the calls in the background
	for _, k := range append(keys, key(t)+"-first") {
		assert.Equal(t, repeat("", 3), valuesOf(t, servers, k), "key %s: released everywhere, node 0 after its SET", k)
	}
}

// releasesToANodeHangingNow: releases sent at once to a node that has just
// hung, before any call found it so, are delivered once it answers, even
// those a driver never wrote (a new connection's handshake waiting on the
// hung server).
func releasesToANodeHangingNow(t *testing.T, h Harness) {
	servers := h.Isolated(t, 3)
	l := healthLocker(t, servers.Nodes(t), core.WithTTL(time.Minute))
	ctx := t.Context()
	var locks []*core.Lock
	var keys []string
	for i := range 20 {
		k := key(t) + "-" + strconv.Itoa(i)
		lock, err := l.Acquire(ctx, k)
		require.NoError(t, err)
		locks, keys = append(locks, lock), append(keys, k)
	}
	require.NoError(t, servers.Pause(0))
	resumed := false
	defer func() {
		if !resumed {
			_ = servers.Resume(0)
		}
	}()
	var wg sync.WaitGroup
	for _, lock := range locks {
		wg.Go(func() { assert.NoError(t, lock.Release(ctx), "a quorum of the others") })
	}
	wg.Wait()
	require.NoError(t, servers.Resume(0))
	resumed = true
	waitHealthy(t, l)
	require.NoError(t, l.Close()) // waits for the calls in the background
	for _, k := range keys {
		assert.Equal(t, repeat("", 3), valuesOf(t, servers, k), "key %s: released on the node that hung, once it answered", k)
	}
}

// healLeavesNoKey (issue 26, item 4): two of three servers hang while
// one client holds a key and another waits for it. The waiter's SETs that
// the hung servers read only when they resume are released at their
// first answer, however long they hung, so the waiter takes the lock
// soon after the heal instead of a TTL later.
func healLeavesNoKey(t *testing.T, h Harness) {
	const ttl = time.Second
	servers := h.Isolated(t, 3)
	parallel := Strategy{Name: "parallel", New: func() strategies.Strategy { return strategies.Parallel() }}
	opts := []core.Option{core.WithTTL(ttl), core.WithNodeTimeout(100 * time.Millisecond), core.WithTries(1000)}
	holder := newLocker(t, servers.Nodes(t), parallel, opts...)
	waiter := newLocker(t, servers.Nodes(t), parallel, opts...)
	ctx, k := t.Context(), key(t)
	lock, err := holder.Acquire(ctx, k)
	require.NoError(t, err)
	_, err = waiter.TryAcquire(ctx, k)
	require.ErrorIs(t, err, core.ErrNotAcquired)

	require.NoError(t, servers.Pause(1))
	require.NoError(t, servers.Pause(2))
	resumed := false
	defer func() {
		if !resumed {
			_ = servers.Resume(1)
			_ = servers.Resume(2)
		}
	}()
	// A round the hung servers fail: its SETs wait in their sockets, and
	// its releases are owed to them.
	_, err = waiter.TryAcquire(ctx, k)
	require.ErrorIs(t, err, core.ErrUnavailable)
	type result struct {
		lock *core.Lock
		err  error
		at   time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, err := waiter.Acquire(ctx, k)
		got <- result{l, err, time.Now()}
	}()
	require.ErrorIs(t, lock.Release(ctx), core.ErrUnavailable, "owed to the hung servers")
	time.Sleep(3 * ttl / 2) // the fault outlasts the TTL of every key written before it
	require.NoError(t, servers.Resume(1))
	require.NoError(t, servers.Resume(2))
	resumed = true
	healed := time.Now()

	r := <-got
	require.NoError(t, r.err)
	assert.Less(t, r.at.Sub(healed), ttl/2, "the waiter takes the lock soon after the heal, not a TTL later")
	waitHealthy(t, waiter)
	for i, v := range valuesOf(t, servers, k)[1:] {
		assert.Contains(t, []string{"", r.lock.Value()}, v, "server %d: a value of a failed round is left", i+1)
	}
	require.NoError(t, r.lock.Release(ctx))
}

// handOffWithHeraldDown: with the herald (the first node by name) dead or
// hung, a waiter still gets the lock handed over on release, through the
// next node by name, well before its retry delay would let it poll.
func handOffWithHeraldDown(t *testing.T, h Harness, fault string) {
	servers := h.Isolated(t, 3)
	retry := core.WithRetryDelay(strategies.JitterDelay(time.Minute, time.Minute)) // no polling in this test
	nodes := servers.Nodes(t)
	var names []string
	for _, n := range nodes {
		names = append(names, n.String())
	}
	herald := slices.Index(names, slices.Min(names))
	holder := healthLocker(t, nodes, retry, core.WithTTL(time.Minute))
	waiter := healthLocker(t, servers.Nodes(t), retry, core.WithTTL(time.Minute))
	switch fault {
	case "dead":
		require.NoError(t, servers.Stop(herald))
		defer func() { _ = servers.Start(herald) }()
	case "hung":
		require.NoError(t, servers.Pause(herald))
		defer func() { _ = servers.Resume(herald) }()
	}
	ctx := t.Context()
	k := key(t)
	lock, err := holder.Acquire(ctx, k)
	require.NoError(t, err)

	wctx, cancel := context.WithTimeout(ctx, 20*healthTimeout) // well under the retry delay
	defer cancel()
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(wctx, k)
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	tick := time.NewTicker(healthTimeout / 10)
	defer tick.Stop()
	for waiter.Stats().Watching == 0 { // lost its round and waits for a notice
		select {
		case <-tick.C:
		case err := <-got:
			require.Failf(t, "the waiter returned before the release", "%v", err)
		}
	}
	require.NoError(t, lock.Release(ctx))
	require.NoError(t, <-got, "handed over through the next node by name, not polled for")
}
