package core_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// identified makes l check the identity of each of its nodes (an
// acquisition and a release on every node), so that a test can measure
// later rounds without the first contact's identity checks.
func identified(t *testing.T, l *core.Locker) {
	t.Helper()
	lock, err := l.TryAcquire(t.Context(), "identified")
	require.NoError(t, err)
	require.NoError(t, lock.Release(t.Context()))
}

// alias is another name for a server: the node that a second driver, or
// a second spelling of its address, makes for the memory node it points
// to. Pointing it at another node plays an address corrected.
type alias struct {
	name   string
	target atomic.Pointer[memory.Node]
}

var _ driver.Batcher = (*alias)(nil)

func newAlias(name string, n *memory.Node) *alias {
	a := &alias{name: name}
	a.target.Store(n)
	return a
}

func (a *alias) String() string { return a.name }
func (a *alias) Close() error   { return nil } // the server's own node closes it

func (a *alias) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return a.target.Load().SetNX(ctx, key, value, ttl)
}

func (a *alias) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	return a.target.Load().EvalSHA(ctx, sha, keys, args)
}

func (a *alias) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	return a.target.Load().Eval(ctx, script, keys, args)
}

func (a *alias) EvalBatch(ctx context.Context, calls []driver.Call) {
	a.target.Load().EvalBatch(ctx, calls)
}

func (a *alias) Classify(err error) driver.ErrorKind { return a.target.Load().Classify(err) }

// lastNodes keeps the per-node results of the last operation observed.
type lastNodes struct {
	mu    sync.Mutex
	nodes []core.NodeResult
}

func (o *lastNodes) Observe(_ context.Context, e core.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nodes = slices.Clone(e.Nodes)
}

func (o *lastNodes) get() []core.NodeResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.nodes
}

// oneServerTwice returns a Locker over server A, A again under the name
// "a-again", and server B: three nodes, two servers. last has the node
// results of its last operation.
func oneServerTwice(t *testing.T, opts ...core.Option) (l *core.Locker, a, b *memory.Node, again *alias, last *lastNodes) {
	t.Helper()
	a, b = memory.New(memory.WithName("a")), memory.New(memory.WithName("b"))
	again = newAlias("a-again", a)
	last = new(lastNodes)
	l, err := core.New([]core.Node{a, again, b}, append(opts, core.WithObserver(last))...)
	require.NoError(t, err, "the names differ, so New cannot tell")
	t.Cleanup(func() {
		b.StartKeepingData() // if a test stopped it, for Close's releases
		require.NoError(t, l.Close())
	})
	return l, a, b, again, last
}

// requireDuplicate checks that node r failed as a duplicate of other.
func requireDuplicate(t *testing.T, r core.NodeResult, other string, server *memory.Node) {
	t.Helper()
	require.Equal(t, core.OutcomeFailed, r.Outcome, "node %s", r.Node)
	var dup *core.DuplicateNodeError
	require.ErrorAs(t, r.Err, &dup)
	id, ttl, ok := server.Get(driver.IdentityKey)
	require.True(t, ok, "the server keeps its identity")
	assert.Zero(t, ttl, "for good")
	assert.Equal(t, core.DuplicateNodeError{Node: r.Node, Other: other, Identity: id}, *dup)
	require.ErrorIs(t, r.Err, core.ErrDuplicateNode)
	require.ErrorIs(t, r.Err, core.ErrInvalidArgument, "the node list is wrong: retrying cannot help")
	assert.Equal(t, `quorumlock: node "`+r.Node+`" is the same server as node "`+other+`" (identity key quorumlock:node = "`+id+
		`"): one server, one vote; its vote does not count: list each server once`, r.Err.Error())
}

// The trap of issue 15: one server listed twice (through two drivers, or
// as localhost and 127.0.0.1) beside a second server. With the second one
// down, an extension answered by the one server alone must not reach a
// quorum of 2 of 3.
func TestOneServerOneVote(t *testing.T) {
	t.Run("extend", func(t *testing.T) {
		l, a, b, _, _ := oneServerTwice(t, core.WithStrategy(strategies.Sequential()))
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		b.Stop()
		err = lock.Extend(t.Context())
		require.ErrorIs(t, err, core.ErrUnavailable, "a minority does not keep the lock")
		require.ErrorIs(t, err, core.ErrDuplicateNode)
		qe := quorumError(t, err)
		assert.Equal(t, []core.Outcome{core.OutcomeOK, core.OutcomeFailed, core.OutcomeFailed}, outcomes(qe))
		requireDuplicate(t, qe.Nodes[1], "a", a)
		require.ErrorIs(t, qe.Nodes[2].Err, memory.ErrDown)
		assert.Regexp(t, `; 1 a-again failed in [^:]*: quorumlock: node "a-again" is the same server as node "a" `, err.Error())
	})
	// Whichever name's yes comes first votes for the server; the other
	// is the duplicate.
	for _, s := range allStrategies() {
		t.Run("extend/"+s.String(), func(t *testing.T) {
			l, a, b, _, _ := oneServerTwice(t, core.WithStrategy(s))
			lock, err := l.TryAcquire(t.Context(), "k")
			require.NoError(t, err)
			b.Stop()
			err = lock.Extend(t.Context())
			require.ErrorIs(t, err, core.ErrUnavailable)
			qe := quorumError(t, err)
			// Fail-fast may cut the server's own call short, or not make
			// it, once the other two have failed: at most one vote.
			ok, _, _ := qe.Counts()
			assert.LessOrEqual(t, ok, 1, "one vote at most for the one server")
			var dup *core.DuplicateNodeError
			require.ErrorAs(t, err, &dup)
			names := map[string]string{"a": "a-again", "a-again": "a"}
			require.Contains(t, names, dup.Node)
			assert.Equal(t, names[dup.Node], dup.Other)
			for _, r := range qe.Nodes[:2] {
				if r.Node == dup.Node {
					requireDuplicate(t, r, dup.Other, a)
				} else {
					assert.Contains(t, []core.Outcome{core.OutcomeOK, core.OutcomeCanceled, core.OutcomeNotTried}, r.Outcome)
				}
			}
		})
	}
	t.Run("keep-alive", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const ttl = time.Second
			l, a, b, _, _ := oneServerTwice(t, core.WithTTL(ttl), core.WithStrategy(strategies.Sequential()))
			lock := keptAlive(t, l, "k")
			b.Stop()
			select {
			case <-lock.Done():
			case <-time.After(10 * ttl):
				require.FailNow(t, "the lock lives on, kept alive by one server counted twice")
			}
			require.ErrorIs(t, lock.Err(), core.ErrLockLost, "the renewals (batched) count the server once")
			require.ErrorIs(t, lock.Err(), core.ErrUnavailable)
			qe := quorumError(t, lock.Err())
			requireDuplicate(t, qe.Nodes[1], "a", a)
		})
	})
	t.Run("acquire and release", func(t *testing.T) {
		l, a, b, _, last := oneServerTwice(t, core.WithStrategy(strategies.Sequential()))
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		// Until its first yes, "a-again" is not known as a duplicate: the
		// server itself refuses its SET, having taken "a"'s.
		assert.Equal(t, []core.Outcome{core.OutcomeOK, core.OutcomeRefused, core.OutcomeOK}, outcomesOf(last.get()))
		assert.Empty(t, l.Stats().Duplicate, "not known yet")
		require.NoError(t, lock.Extend(t.Context()), "a and b are a quorum")
		requireDuplicate(t, last.get()[1], "a", a)
		assert.Equal(t, []string{"a-again"}, l.Stats().Duplicate, "said where an operator looks, although every call succeeds")

		// Known now: its calls fail without running.
		before := a.Calls()
		err = lock.Release(t.Context())
		require.NoError(t, err)
		after := a.Calls()
		assert.Equal(t, 1, after.EvalSHA+after.Eval-after.Identifies-(before.EvalSHA+before.Eval-before.Identifies), "a's release only")
		assert.Equal(t, 1, after.Identifies-before.Identifies, "a-again checked again")
		assert.Empty(t, a.Keys())
		assert.Empty(t, b.Keys())

		_, err = l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		requireDuplicate(t, last.get()[1], "a", a)
		assert.Equal(t, []core.Outcome{core.OutcomeOK, core.OutcomeFailed, core.OutcomeOK}, outcomesOf(last.get()))
		b.Stop()
		_, err = l.TryAcquire(t.Context(), "k2")
		require.ErrorIs(t, err, core.ErrUnavailable)
		requireDuplicate(t, quorumError(t, err).Nodes[1], "a", a)
		assert.Equal(t, []string{"k"}, a.Keys(), "the failed round's key was released")
	})
	// The drivers reconnect to a restarted server without a failed call,
	// so nothing marks "a" unverified; the server's new identity is
	// checked against a fresh answer from every verified node.
	t.Run("a restart without persistence between calls", func(t *testing.T) {
		l, a, b, _, last := oneServerTwice(t, core.WithStrategy(strategies.Sequential()), core.WithRestartGuard(0))
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		require.NoError(t, lock.Extend(t.Context()))
		requireDuplicate(t, last.get()[1], "a", a)
		require.NoError(t, lock.Release(t.Context()))
		old, _, _ := a.Get(driver.IdentityKey)

		a.Stop()
		a.Start() // empty: no lock, no identity
		lock, err = l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		requireDuplicate(t, last.get()[1], "a", a)
		id, _, _ := a.Get(driver.IdentityKey)
		assert.NotEqual(t, old, id, "a new identity")
		b.Stop()
		err = lock.Extend(t.Context())
		require.ErrorIs(t, err, core.ErrUnavailable)
		requireDuplicate(t, quorumError(t, err).Nodes[1], "a", a)
	})
	t.Run("an address corrected heals", func(t *testing.T) {
		l, a, b, again, last := oneServerTwice(t, core.WithStrategy(strategies.Sequential()))
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		require.NoError(t, lock.Extend(t.Context()))
		requireDuplicate(t, last.get()[1], "a", a)
		require.NoError(t, lock.Release(t.Context()))

		c := memory.New()
		again.target.Store(c)
		lock, err = l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, []core.Outcome{core.OutcomeOK, core.OutcomeOK, core.OutcomeOK}, outcomesOf(last.get()),
			"a-again is a server of its own now")
		b.Stop()
		require.NoError(t, lock.Extend(t.Context()), "a and c are a quorum")
		idA, _, _ := a.Get(driver.IdentityKey)
		idC, _, _ := c.Get(driver.IdentityKey)
		assert.NotEqual(t, idA, idC)
	})
}

// Without nodes listed twice, the checks cost each node's identity at its
// first yes, and the identities of the nodes verified before it (its
// identity is new); none after, while no node fails.
func TestIdentityCost(t *testing.T) {
	l, nodes := newLocker(t, 3, core.WithStrategy(strategies.Sequential()))
	identified(t, l)
	for i, n := range nodes {
		assert.Equal(t, 3-i, n.Calls().Identifies, "node %d: its own, and one for each node after it", i)
		id, _, ok := n.Get(driver.IdentityKey)
		require.True(t, ok)
		assert.Len(t, id, 27, "a lock value's randomness")
		assert.Empty(t, n.Keys(), "Keys leaves out the identity, as the birth key")
	}
	before := make([]memory.Calls, len(nodes))
	for i, n := range nodes {
		before[i] = n.Calls()
	}
	for range 10 {
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		require.NoError(t, lock.Extend(t.Context()))
		require.NoError(t, lock.KeepAlive())
		require.NoError(t, lock.Release(t.Context()))
	}
	for i, n := range nodes {
		c := n.Calls()
		assert.Equal(t, before[i].Identifies, c.Identifies, "node %d: no check on the fast path", i)
		assert.Equal(t, 10, c.Acquires-before[i].Acquires)
		assert.Equal(t, 30, c.EvalSHA+c.Eval-before[i].EvalSHA-before[i].Eval, "node %d: the acquisitions, extensions and releases only", i)
	}
}

// A failed call has its node checked again before its next yes counts:
// the connection that answers after a reconnect may lead to another
// server.
func TestIdentityCheckedAgainAfterFailure(t *testing.T) {
	last := new(lastNodes)
	l, nodes := newLocker(t, 3, core.WithStrategy(strategies.Sequential()), core.WithObserver(last))
	lock, err := l.TryAcquire(t.Context(), "k")
	require.NoError(t, err)
	checks := func() []int {
		out := make([]int, len(nodes))
		for i, n := range nodes {
			out[i] = n.Calls().Identifies
		}
		return out
	}
	require.Equal(t, []int{3, 2, 1}, checks(), "see TestIdentityCost")
	id, _, _ := nodes[0].Get(driver.IdentityKey)

	nodes[0].Stop()
	require.NoError(t, lock.Extend(t.Context()))
	assert.Equal(t, []int{3, 2, 1}, checks(), "a node that fails is not asked who it is")
	nodes[0].StartKeepingData() // back, as a restart with persistence
	core.Settle(l)              // the probe finds it answering
	require.NoError(t, lock.Extend(t.Context()))
	// By SHA, then by source: the restart emptied the script cache.
	assert.Equal(t, []int{5, 2, 1}, checks(), "checked again when it answered after the failure, and its identity is known")
	assert.Equal(t, core.OutcomeOK, last.get()[0].Outcome)
	again, _, _ := nodes[0].Get(driver.IdentityKey)
	assert.Equal(t, id, again, "the server kept its identity")
	require.NoError(t, lock.Extend(t.Context()))
	assert.Equal(t, []int{5, 2, 1}, checks(), "and not after")

	require.NoError(t, lock.Release(t.Context()))
}

// A node that cannot say who it is (an ACL that forbids the identity
// key, say) does not vote; the calls still go out, so a failed round
// still releases it.
func TestIdentityCheckFails(t *testing.T) {
	a, b := memory.New(memory.WithName("a")), memory.New(memory.WithName("b"))
	denied := &noIdentity{Node: b}
	l, err := core.New([]core.Node{a, denied}, core.WithRestartGuard(0))
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	_, err = l.TryAcquire(t.Context(), "k")
	require.ErrorIs(t, err, core.ErrUnavailable)
	require.ErrorIs(t, err, errNoPerm)
	assert.Equal(t, []core.Outcome{core.OutcomeOK, core.OutcomeFailed}, outcomes(quorumError(t, err)))
	assert.Empty(t, a.Keys())
	assert.Empty(t, b.Keys(), "the clean-up reached the node that could not vote")
}

var errNoPerm = errors.New("NOPERM this user has no permissions to access the 'quorumlock:node' key")

// noIdentity refuses the identity check, as an ACL without the key does.
type noIdentity struct{ *memory.Node }

func (n *noIdentity) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	if script == driver.ScriptIdentify.Source() {
		return nil, errNoPerm
	}
	return n.Node.Eval(ctx, script, keys, args)
}

func (n *noIdentity) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	if sha == driver.ScriptIdentify.SHA() {
		return nil, errNoPerm
	}
	return n.Node.EvalSHA(ctx, sha, keys, args)
}

// A new identity is checked against every verified node; when one of
// them hangs, the failure is that node's: it becomes suspect, and the
// node checked, which answered, does not (issue 26). That node does not
// vote until a check succeeds, which it does at once in the next round:
// the hung node is no longer verified.
func TestIdentityCheckAgainstAHungNode(t *testing.T) {
	const timeout = 50 * time.Millisecond
	start := func(t *testing.T, opts ...core.Option) (l *core.Locker, a, b, c *memory.Node, last *lastNodes) {
		last = new(lastNodes)
		a, b, c = memory.New(memory.WithName("a")), memory.New(memory.WithName("b")), memory.New(memory.WithName("c"))
		l, err := core.New([]core.Node{a, b, c}, append(opts, core.WithNodeTimeout(timeout), core.WithObserver(last))...)
		require.NoError(t, err)
		t.Cleanup(func() { a.Resume(); require.NoError(t, l.Close()) })
		return l, a, b, c, last
	}
	t.Run("in a round", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, a, b, c, last := start(t, core.WithStrategy(strategies.Parallel()))
			ctx := t.Context()
			// a's yes verifies it; b and c refuse, so they are not checked yet.
			b.Set("k", "rival", time.Hour)
			c.Set("k", "rival", time.Hour)
			_, err := l.TryAcquire(ctx, "k")
			require.ErrorIs(t, err, core.ErrNotAcquired)

			a.Pause()
			_, err = l.TryAcquire(ctx, "k2")
			require.ErrorIs(t, err, core.ErrUnavailable, "b and c cannot be told apart from a yet")
			qe := quorumError(t, err)
			require.ErrorIs(t, qe.Nodes[0].Err, core.ErrNodeTimeout)
			for _, r := range qe.Nodes[1:] {
				require.Equal(t, core.OutcomeFailed, r.Outcome, "node %s", r.Node)
				assert.Contains(t, r.Err.Error(), `quorumlock: node "`+r.Node+`" has a new identity`)
				assert.Contains(t, r.Err.Error(), `and node "a", which may be the same server, could not say who it is: no answer within the node timeout of 50ms`)
				require.ErrorIs(t, r.Err, core.ErrNodeTimeout, "a's")
				require.NotErrorIs(t, r.Err, context.DeadlineExceeded, "no context of the caller's ended")
			}
			assert.Equal(t, []string{"a"}, l.Stats().Suspect)

			lock, err := l.TryAcquire(ctx, "k2")
			require.NoError(t, err, "b and c are checked against each other, not against a")
			assert.Equal(t, []core.Outcome{core.OutcomeFailed, core.OutcomeOK, core.OutcomeOK}, outcomesOf(last.get()))
			require.ErrorIs(t, last.get()[0].Err, core.ErrNodeSuspect)
			require.NoError(t, lock.Release(ctx))
		})
	})
	// A probe asks a suspect node who it is: a server restarted empty
	// answers with a new identity, which the probe checks against the
	// verified nodes. The hung one is suspect then; the probed one rejoins.
	t.Run("in a probe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, a, b, _, _ := start(t, core.WithRestartGuard(0))
			ctx := t.Context()
			lock, err := l.TryAcquire(ctx, "k")
			require.NoError(t, err)
			b.Stop()
			require.NoError(t, lock.Extend(ctx))
			require.Equal(t, []string{"b"}, l.Stats().Suspect)

			b.Start() // empty: a new identity
			a.Pause()
			time.Sleep(100*time.Millisecond + timeout) // the probe's interval and its check
			synctest.Wait()
			assert.Equal(t, []string{"a"}, l.Stats().Suspect, "b answered; a did not")
			a.Resume()
			require.NoError(t, lock.Release(ctx))
		})
	})
}
