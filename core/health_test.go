package core_test

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"
)

// These tests drive node health (docs/design.md, node health): what a
// hung node costs the releases sent to it, and what it is owed.

// hungTimeout is the node timeout of these tests.
const hungTimeout = 100 * time.Millisecond

// releasedDuringHang acquires 41 locks through l, hangs node 0, and
// releases 40 of them, each within a node timeout and without a goroutine
// each. It returns the last lock, still held.
func releasedDuringHang(t *testing.T, l *core.Locker, node0 *memory.Node) *core.Lock {
	t.Helper()
	locks := make([]*core.Lock, 41)
	for i := range locks {
		var err error
		locks[i], err = l.Acquire(t.Context(), "k"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	node0.Pause()
	before := runtime.NumGoroutine()
	for i, lock := range locks[:40] {
		start := time.Now()
		require.NoError(t, lock.Release(t.Context()), "a quorum of the others")
		require.LessOrEqual(t, time.Since(start), hungTimeout, "release %d", i)
	}
	// One call to the hung node in the background, and its probe (and a
	// little slack for the test runner's goroutines outside the bubble).
	require.LessOrEqual(t, runtime.NumGoroutine()-before, 4, "a goroutine per release to the hung node")
	return locks[40]
}

// hungLocker returns a Locker over three memory nodes with the node
// timeout hungTimeout; with plain, node 0 is not a driver.Batcher.
func hungLocker(t *testing.T, plain bool) (*core.Locker, []*memory.Node) {
	t.Helper()
	nodes := memory.NewNodes(3)
	list := memory.AsNodes(nodes)
	if plain {
		list[0] = struct{ core.Node }{nodes[0]}
	}
	l, err := core.New(list, core.WithNodeTimeout(hungTimeout))
	require.NoError(t, err)
	return l, nodes
}

func TestReleasesToAHungNode(t *testing.T) {
	t.Run("a Release whose outcome is open waits one node timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := hungLocker(t, false)
			defer func() { require.NoError(t, l.Close()) }()
			lock := releasedDuringHang(t, l, nodes[0])
			nodes[1].Del("k40") // expired there: the hung node's answer decides
			start := time.Now()
			err := lock.Release(t.Context())
			assert.Equal(t, hungTimeout, time.Since(start), "not behind the 40 releases before it")
			require.ErrorIs(t, err, core.ErrUnavailable)
			res := quorumError(t, err).Nodes[0]
			assert.Equal(t, core.OutcomeFailed, res.Outcome)
			require.ErrorIs(t, res.Err, core.ErrNodeSuspect)
			assert.Contains(t, res.Err.Error(), "owed", "not \"failed in 100ms\": it was not asked")
			nodes[0].Resume()
		})
	})
	t.Run("owed releases go in one batch once it answers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := hungLocker(t, false)
			defer func() { require.NoError(t, l.Close()) }()
			lock := releasedDuringHang(t, l, nodes[0])
			before := nodes[0].Calls()
			nodes[0].Resume()
			core.Settle(l) // its probe has found it answering
			assert.Equal(t, []string{"k40"}, nodes[0].Keys(), "every release it was owed, delivered")
			after := nodes[0].Calls()
			assert.Equal(t, 1, after.Batches-before.Batches, "40 releases in one round trip")
			assert.Empty(t, l.Stats().Suspect)
			require.NoError(t, lock.Release(t.Context()))
		})
	})
	t.Run("Shutdown returns by its context's end", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := hungLocker(t, false)
			releasedDuringHang(t, l, nodes[0])
			start := time.Now()
			short, cancel := context.WithTimeout(t.Context(), hungTimeout/4)
			defer cancel()
			require.ErrorIs(t, l.Shutdown(short), context.DeadlineExceeded, "the last try of the owed releases outlasts it")
			assert.Equal(t, hungTimeout/4, time.Since(start))

			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			require.NoError(t, l.Shutdown(ctx), "waits for the last try")
			assert.Equal(t, 2*hungTimeout, time.Since(start),
				"the last try: it waits for the release Close sent in the background, then one identity check, unanswered")
			require.NoError(t, l.Close(), "finished")
			assert.Equal(t, 41, l.Stats().Owed, "the releases its last try could not send: 40, and the one of the lock Close released")
			nodes[0].Resume()
		})
	})
	t.Run("Close's last try waits for a call running there", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := hungLocker(t, false)
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			nodes[0].Pause()
			_, err = l.TryAcquire(t.Context(), "x") // node 0 times out: suspect
			require.NoError(t, err)
			_, err = l.TryAcquire(t.Context(), "y") // asks it in the background
			require.NoError(t, err)
			require.NoError(t, lock.Release(t.Context()), "a quorum of the others; node 0 is owed it")
			go func() { // after the call in the background has timed out
				time.Sleep(hungTimeout * 3 / 2)
				nodes[0].Resume()
			}()
			require.NoError(t, l.Close())
			_, _, left := nodes[0].Get("k")
			assert.False(t, left, "the owed release was dropped behind the call that held the node")
		})
	})
	t.Run("Close's last try is bounded", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, nodes := hungLocker(t, true) // one call per owed release
			releasedDuringHang(t, l, nodes[0])
			nodes[0].SetLatency(hungTimeout * 9 / 10) // it answers, slowly
			nodes[0].Resume()
			start := time.Now()
			require.NoError(t, l.Close())
			assert.LessOrEqual(t, time.Since(start), 5*hungTimeout, "40 releases one by one would take 3.6 s")
			left := nodes[0].Keys()
			assert.NotEmpty(t, left, "some releases were dropped: their keys expire at their TTL")
			assert.Equal(t, len(left), l.Stats().Owed, "Stats counts the releases Close could not send")
		})
	})
}

// lastRelease returns the results of the last release rec saw.
func lastRelease(rec *recorder) []core.NodeResult {
	events := rec.take()
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind == core.OpRelease {
			return events[i].Nodes
		}
	}
	return nil
}

func TestReleaseResultsOfNodesNotAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		nodes := memory.NewNodes(3)
		l, err := core.New(memory.AsNodes(nodes), core.WithNodeTimeout(hungTimeout), core.WithObserver(rec))
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		nodes[0].Pause()
		first, err := l.Acquire(t.Context(), "a") // finds node 0 hung
		require.NoError(t, err)
		sent, err := l.Acquire(t.Context(), "b") // its SET to node 0 waits in the background
		require.NoError(t, err)
		skipped, err := l.Acquire(t.Context(), "c") // node 0 not sent its SET: a call runs there
		require.NoError(t, err)

		require.NoError(t, skipped.Release(t.Context()))
		assert.Equal(t, core.OutcomeNotTried, lastRelease(rec)[0].Outcome, "never sent the key: nothing to release, not asked, not \"refused\"")
		require.NoError(t, sent.Release(t.Context()))
		res := lastRelease(rec)[0]
		assert.Equal(t, core.OutcomeFailed, res.Outcome)
		require.ErrorIs(t, res.Err, core.ErrNodeSuspect)
		assert.Contains(t, res.Err.Error(), "owed")
		require.NoError(t, first.Release(t.Context()))

		nodes[0].Resume()
		core.Settle(l)
		assert.Empty(t, nodes[0].Keys(), "every key set there released after its SET")
	})
}

// gatedNode is a node whose calls, once it is shut, wait until it opens
// (or their context ends), as a server that hangs and resumes.
type gatedNode struct {
	*noticeNode
	mu   sync.Mutex
	gate chan struct{} // nil while open; shut: closed to open it
}

func (g *gatedNode) wait(ctx context.Context) error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedNode) shut() { g.mu.Lock(); g.gate = make(chan struct{}); g.mu.Unlock() }

func (g *gatedNode) open() {
	g.mu.Lock()
	close(g.gate)
	g.gate = nil
	g.mu.Unlock()
}

func (g *gatedNode) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := g.wait(ctx); err != nil {
		return false, err
	}
	return g.noticeNode.SetNX(ctx, key, value, ttl)
}

func (g *gatedNode) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.noticeNode.EvalSHA(ctx, sha, keys, args)
}

func (g *gatedNode) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.noticeNode.Eval(ctx, script, keys, args)
}

func (g *gatedNode) EvalBatch(ctx context.Context, calls []driver.Call) {
	if err := g.wait(ctx); err != nil {
		for i := range calls {
			calls[i].Err = err
		}
		return
	}
	g.noticeNode.EvalBatch(ctx, calls)
}

// pausingStrategy is a strategy whose next round, once armed, starts only
// when before returns.
type pausingStrategy struct {
	strategies.Strategy
	mu     sync.Mutex
	before func()
}

func (p *pausingStrategy) arm(before func()) { p.mu.Lock(); p.before = before; p.mu.Unlock() }

func (p *pausingStrategy) Run(ctx context.Context, r strategies.Round, results []strategies.Result) {
	p.mu.Lock()
	before := p.before
	p.before = nil
	p.mu.Unlock()
	if before != nil {
		before()
	}
	p.Strategy.Run(ctx, r, results)
}

// TestWokenRoundWithHeraldTurningSuspect: a woken round's leader (the
// herald) grants, then turns suspect before the round asks the others.
// Its grant is its answer: the round counts it, does not ask it again in
// the background nor let it rejoin without an answer, and releases the
// key there when the round fails.
func TestWokenRoundWithHeraldTurningSuspect(t *testing.T) {
	const delay = time.Minute
	synctest.Test(t, func(t *testing.T) {
		nodes := []*memory.Node{memory.New(memory.WithName("a")), memory.New(memory.WithName("b")), memory.New(memory.WithName("c"))}
		herald := &gatedNode{noticeNode: &noticeNode{Node: nodes[0]}}
		strategy := &pausingStrategy{Strategy: strategies.Parallel()}
		l, err := core.New([]core.Node{herald, nodes[1], nodes[2]}, core.WithNodeTimeout(hungTimeout), core.WithStrategy(strategy),
			core.WithTries(100), core.WithRetryDelay(strategies.JitterDelay(delay, delay)))
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		warm, err := l.Acquire(t.Context(), "warm") // every node's identity checked
		require.NoError(t, err)
		require.NoError(t, warm.Release(t.Context()))
		for _, n := range nodes[1:] {
			n.Set("k", "rival", time.Hour)
			n.Set("x", "rival", time.Hour)
		}

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		got := make(chan error, 1)
		go func() {
			_, err := l.Acquire(ctx, "k")
			got <- err
		}()
		synctest.Wait() // lost its first round, subscribed, waiting
		require.Equal(t, 1, l.Stats().Watching)

		herald.shut()
		other := make(chan error, 1)
		go func() { // its call to "a" times out while the woken round runs
			_, err := l.TryAcquire(t.Context(), "x")
			other <- err
		}()
		synctest.Wait()
		// The woken round: "a" grants "k" at once (the notice came through
		// another connection), then turns suspect before the others are
		// asked.
		inner := make(chan struct{})
		strategy.arm(func() {
			for !slices.Contains(l.Stats().Suspect, "a") {
				time.Sleep(time.Millisecond) // fake time: until the call for "x" times out
			}
			close(inner)
		})
		herald.mu.Lock()
		gate := herald.gate
		herald.gate = nil // "a" answers the leader's SET and its identity check
		herald.mu.Unlock()
		herald.notify("")
		synctest.Wait()
		herald.mu.Lock()
		herald.gate = gate
		herald.mu.Unlock()
		require.ErrorIs(t, <-other, core.ErrNotAcquired)
		<-inner
		synctest.Wait() // the woken round has ended
		assert.Contains(t, l.Stats().Suspect, "a", "rejoined without an answer")
		v, _, ok := nodes[0].Get("k")
		require.True(t, ok, "the woken round's SET is on \"a\"")

		herald.open()
		core.Settle(l) // "a" answers a probe, and is sent what it is owed
		_, _, ok = nodes[0].Get("k")
		assert.False(t, ok, "the woken round's value %.6s left on \"a\"", v)

		cancel()
		err = <-got
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, []core.Outcome{core.OutcomeOK, core.OutcomeRefused, core.OutcomeRefused}, outcomes(quorumError(t, err)),
			"the leader's grant is its answer in the round")
	})
}
