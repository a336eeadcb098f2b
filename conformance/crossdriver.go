package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// Driver is one way of reaching a harness's servers, for RunCrossDriver.
type Driver struct {
	// Name names the driver in subtest names.
	Name string
	// Nodes returns fresh nodes of this driver over s, one per server, in
	// order. What they hold is released when the test ends.
	Nodes func(t *testing.T, s Servers) []core.Node
}

// RunCrossDriver checks that drivers agree on the wire: for every ordered
// pair (A, B) of drivers, on the same three servers, a lock acquired
// through A is held as far as B can tell, is extended and released by B
// running the protocol's scripts with the lock's value, and A's Lock then
// knows it is gone. A wrong value sent through B changes nothing.
//
// Like Run, it checks for leaked goroutines once the harness is closed;
// of the RunOptions, only WithLeakGrace applies.
func RunCrossDriver(t *testing.T, newHarness HarnessMaker, drivers []Driver, opts ...RunOption) {
	require.GreaterOrEqual(t, len(drivers), 2, "conformance: RunCrossDriver needs two drivers or more")
	h, _ := begin(t, newHarness, opts)
	h.Shared(t, 3) // start the servers once, before the parallel subtests
	for _, a := range drivers {
		for _, b := range drivers {
			if a.Name == b.Name {
				continue
			}
			t.Run(fmt.Sprintf("%s->%s", a.Name, b.Name), func(t *testing.T) {
				t.Parallel()
				crossDriver(t, h.Shared(t, 3), a, b)
			})
		}
	}
}

func crossDriver(t *testing.T, s Servers, a, b Driver) {
	ctx, k := t.Context(), key(t)
	s0 := Strategies()[0]
	la := newLocker(t, a.Nodes(t, s), s0)
	lb := newLocker(t, b.Nodes(t, s), s0)
	bNodes := b.Nodes(t, s)

	lock, err := la.Acquire(ctx, k)
	require.NoError(t, err)
	require.Equal(t, repeat(lock.Value(), s.Len()), valuesOf(t, s, k))

	// Held, as B sees it.
	_, err = lb.TryAcquire(ctx, k)
	require.ErrorIs(t, err, core.ErrNotAcquired, "%s must see %s's lock as held", b.Name, a.Name)
	assert.Equal(t, repeat(lock.Value(), s.Len()), valuesOf(t, s, k), "a refused acquisition leaves the holder's keys")

	// A wrong value through B neither extends nor releases.
	for i, n := range bNodes {
		for _, sc := range []driver.Script{driver.ScriptExtend, driver.ScriptRelease} {
			reply, err := runScript(ctx, n, sc, []string{k}, []string{"not-" + lock.Value(), "60000"})
			require.NoError(t, err, "%s on node %d", sc.Name(), i)
			assert.Equal(t, int64(0), reply, "%s with a wrong value on node %d", sc.Name(), i)
		}
	}

	// Extended through B: every server's TTL is raised past the Locker's.
	const longer = time.Minute
	for i, n := range bNodes {
		reply, err := runScript(ctx, n, driver.ScriptExtend, []string{k}, []string{lock.Value(), fmt.Sprint(longer.Milliseconds())})
		require.NoError(t, err)
		assert.Equal(t, int64(1), reply, "extend through %s on node %d", b.Name, i)
		v, ttl, ok, err := s.Get(ctx, i, k)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, lock.Value(), v)
		assert.Greater(t, ttl, la.TTL(), "server %d: the extension through %s must show", i, b.Name)
	}
	require.NoError(t, lock.Extend(ctx), "%s still holds its lock after %s extended it", a.Name, b.Name)

	// Released through B: the keys are gone and A's Lock finds it lost.
	for i, n := range bNodes {
		reply, err := runScript(ctx, n, driver.ScriptRelease, []string{k}, []string{lock.Value()})
		require.NoError(t, err)
		assert.Equal(t, int64(1), reply, "release through %s on node %d", b.Name, i)
	}
	assert.Equal(t, repeat("", s.Len()), valuesOf(t, s, k))
	require.ErrorIs(t, lock.Extend(ctx), core.ErrLockLost)
	require.ErrorIs(t, lock.Release(ctx), core.ErrNotHeld)

	// And B's own lock is held as A sees it.
	theirs, err := lb.TryAcquire(ctx, k)
	require.NoError(t, err)
	_, err = la.TryAcquire(ctx, k)
	require.ErrorIs(t, err, core.ErrNotAcquired, "%s must see %s's lock as held", a.Name, b.Name)
	require.NoError(t, theirs.Release(ctx))
	assert.Equal(t, repeat("", s.Len()), valuesOf(t, s, k))
}

// runScript runs a protocol script on n as core does: by SHA, then by
// source when the server does not have it.
func runScript(ctx context.Context, n core.Node, s driver.Script, keys, args []string) (any, error) {
	reply, err := n.EvalSHA(ctx, s.SHA(), keys, args)
	if err != nil && n.Classify(err) == driver.KindNoScript {
		reply, err = n.Eval(ctx, s.Source(), keys, args)
	}
	return reply, err
}
