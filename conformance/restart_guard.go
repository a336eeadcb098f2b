package conformance

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// runRestartGuard checks the restart guard (core.WithRestartGuard) on the
// backend's servers: the acquisition script's use of the server's clock
// and of the birth key, and a Locker's view of a server restarted empty,
// restarted with its data, and adopted. Sharded nodes (clusters) are left
// out of the guard, which the group checks instead.
func runRestartGuard(t *testing.T, h Harness) {
	n, _ := oneNode(t, h)
	if s, ok := n.(driver.Sharded); ok && s.Sharded() {
		t.Run("ShardedNodesAreLeftOut", func(t *testing.T) {
			t.Parallel()
			_, err := core.New([]core.Node{n}, core.WithRestartGuard(core.DefaultTTL))
			require.ErrorIs(t, err, core.ErrInvalidArgument, "a guard that can watch no node is refused")
			l := newLocker(t, h.Shared(t, 3).Nodes(t), Strategies()[2])
			assert.Zero(t, l.RestartGuard(), "the default guard does not apply to sharded nodes")
			lock, err := l.TryAcquire(t.Context(), key(t))
			require.NoError(t, err)
			require.NoError(t, lock.Release(t.Context()))
		})
		return
	}
	t.Run("Script", func(t *testing.T) {
		t.Parallel()
		guardScript(t, h)
	})
	t.Run("Locker", func(t *testing.T) {
		t.Parallel()
		guardLocker(t, h)
	})
}

// guardScript runs ScriptAcquireGuarded on one server directly.
func guardScript(t *testing.T, h Harness) {
	n, s := isolatedNode(t, h)
	g := guarded{t: t, ctx: t.Context(), n: n}
	keys := []string{key(t), driver.BirthKey}
	guardScriptBirth(g, s, keys)
	guardScriptAge(g, s, keys)
	guardScriptFenced(g, s)

	// Adopted ("0"): old whatever the minimum age.
	require.NoError(t, s.Set(g.ctx, 0, driver.BirthKey, "0", 0))
	assert.Equal(t, int64(1), g.run([]string{key(t), driver.BirthKey}, 100*365*24*time.Hour))

	// A birth in the future (the clock went back): young, age 0.
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	require.NoError(t, s.Set(g.ctx, 0, driver.BirthKey, future, 0))
	assert.Equal(t, int64(-1), g.run([]string{key(t), driver.BirthKey}, time.Millisecond))
}

// guarded runs ScriptAcquireGuarded on one node, setting the value "v"
// for 60 s.
type guarded struct {
	t   *testing.T
	ctx context.Context
	n   core.Node
}

// try runs the script on keys (the lock, the birth key, and optionally
// the fencing counter) with the minimum age minAge.
func (g guarded) try(keys []string, minAge time.Duration) (int64, error) {
	reply, err := g.n.Eval(g.ctx, driver.ScriptAcquireGuarded.Source(), keys,
		[]string{"v", "60000", strconv.FormatInt(minAge.Milliseconds(), 10)})
	if v, ok := reply.(int64); ok || err != nil {
		return v, err
	}
	return 0, fmt.Errorf("reply %#v is not an integer", reply)
}

// run is try that fails the test on an error.
func (g guarded) run(keys []string, minAge time.Duration) int64 {
	g.t.Helper()
	v, err := g.try(keys, minAge)
	require.NoError(g.t, err)
	return v
}

// guardScriptBirth checks the birth key: a server that has been up longer
// than the minimum age votes on its first guarded call, as its birth is
// its start, not that call; a younger one answers -1 - its age, writes the
// birth key, and sets nothing. (The birth key is deleted before each try,
// as after a restart without persistence.)
func guardScriptBirth(g guarded, s Servers, keys []string) {
	t, ctx, k := g.t, g.ctx, keys[0]
	require.Eventually(t, func() bool {
		if s.Del(ctx, 0, driver.BirthKey) != nil {
			return false
		}
		v, err := g.try(keys, time.Second)
		return err == nil && v == 1
	}, 10*time.Second, 50*time.Millisecond, "a server up over a second votes with a minimum age of 1s")
	require.NoError(t, s.Del(ctx, 0, k))

	require.NoError(t, s.Del(ctx, 0, driver.BirthKey))
	before := time.Now()
	got := g.run(keys, 24*time.Hour)
	assert.LessOrEqual(t, got, int64(-1001), "a young node answers -1 - its age, the server's uptime")
	born, _, ok, err := s.Get(ctx, 0, driver.BirthKey)
	require.NoError(t, err)
	require.True(t, ok, "the first guarded call writes the birth key")
	ms, err := strconv.ParseInt(born, 10, 64)
	require.NoError(t, err, "the birth time is whole milliseconds: %q", born)
	assert.InDelta(t, before.UnixMilli()+got+1, ms, 5000, "the server's TIME less its age (same host)")
	_, _, ok, err = s.Get(ctx, 0, k)
	require.NoError(t, err)
	assert.False(t, ok, "a young node sets nothing")
}

// guardScriptAge checks that the age grows with the server's clock until
// the node is old enough to set the key, after which a held key is
// refused.
func guardScriptAge(g guarded, s Servers, keys []string) {
	t := g.t
	require.Eventually(t, func() bool { return g.run(keys, time.Hour) <= -21 }, 5*time.Second, 5*time.Millisecond,
		"the age reported grows past 20 ms")
	require.Eventually(t, func() bool { return g.run(keys, 20*time.Millisecond) == 1 }, 5*time.Second, 5*time.Millisecond,
		"once old enough, it sets the key")
	v, ttl, ok, err := s.Get(g.ctx, 0, keys[0])
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "v", v)
	assert.InDelta(t, 60000, ttl.Milliseconds(), 5000)
	assert.Equal(t, int64(0), g.run(keys, 0), "a held key is refused")
}

// guardScriptFenced checks the fenced form: the counter KEYS[3] is
// incremented and returned, and a refusal does not count.
func guardScriptFenced(g guarded, s Servers) {
	t, ctx := g.t, g.ctx
	fk := key(t)
	fence, _ := driver.FenceKey(fk)
	require.NoError(t, s.Set(ctx, 0, fence, "41", 0))
	assert.Equal(t, int64(42), g.run([]string{fk, driver.BirthKey, fence}, 0))
	assert.Equal(t, int64(0), g.run([]string{fk, driver.BirthKey, fence}, 0))
	c, _, _, err := s.Get(ctx, 0, fence)
	require.NoError(t, err)
	assert.Equal(t, "42", c, "a refusal does not count")
}

// guardLocker checks a Locker with the guard over three servers that
// restart.
func guardLocker(t *testing.T, h Harness) {
	servers := h.Isolated(t, 3)
	ctx := t.Context()
	l := newLocker(t, servers.Nodes(t), Strategies()[2], core.WithQuorum(3), core.WithTries(1))
	require.NotZero(t, l.RestartGuard(), "on by default for three nodes")
	k := key(t)
	lock, err := l.TryAcquire(ctx, k)
	require.NoError(t, err, "the harness's servers are adopted")
	require.NoError(t, lock.Release(ctx))

	// Restarted with its data (persistence): it forgot nothing.
	require.NoError(t, servers.StopKeepingData(1))
	require.NoError(t, servers.Start(1))
	// A pooled connection may still point at the old process: the first
	// call can fail with EOF, but no call may find the server young.
	require.Eventually(t, func() bool {
		lock, err = l.TryAcquire(ctx, k)
		require.NotErrorIs(t, err, core.ErrNodeRestarted, "a server that kept its birth key votes at once")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, lock.Release(ctx))

	guardYoungServer(ctx, t, l, servers, 2, k)

	// Adopted by its operator: votes at once.
	name := servers.Nodes(t)[2].String()
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, l.Adopt(actx, name))
	lock, err = l.TryAcquire(ctx, k)
	require.NoError(t, err, "adopted: it votes at once")
	require.NoError(t, lock.Release(ctx))
	assert.Equal(t, repeat("", 3), valuesOf(t, servers, k))

	guardWaitsOut(ctx, t, servers, 2, k)
}

// guardYoungServer restarts server i empty: for l, with a quorum of every
// server, it is young for the guard's max TTL. Acquiring k fails with
// core.ErrNodeRestarted, not as an outage, and leaves no key on it.
func guardYoungServer(ctx context.Context, t *testing.T, l *core.Locker, servers Servers, i int, k string) {
	require.NoError(t, servers.Stop(i))
	require.NoError(t, servers.Start(i))
	var qe *core.QuorumError
	var err error
	require.Eventually(t, func() bool {
		_, err = l.TryAcquire(ctx, k)
		// a first call may meet a dropped connection
		return errors.As(err, &qe) && errors.Is(qe.Nodes[i].Err, core.ErrNodeRestarted)
	}, 10*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, err, core.ErrNodeRestarted, "quorum 3 with one young node")
	assert.NotErrorIs(t, err, core.ErrUnavailable, "a young node is no outage")
	assert.Contains(t, qe.Nodes[i].Err.Error(), "(at "+l.RestartGuard().String()+")", "it votes at the guard's minimum age")
	_, _, ok, err := servers.Get(ctx, i, k)
	require.NoError(t, err)
	assert.False(t, ok, "the young server holds no key")
}

// waitCounter is an Observer that counts the restart guard's waits.
type waitCounter struct{ n *atomic.Int32 }

func (w waitCounter) Observe(_ context.Context, e core.Event) {
	if e.Kind == core.OpWait {
		w.n.Add(1)
	}
}

// guardWaitsOut restarts server i empty while a Locker needs it for a
// quorum: Acquire waits until it votes, within its context, and tells its
// Observer. (A short TTL keeps the guard's wait short.)
func guardWaitsOut(ctx context.Context, t *testing.T, servers Servers, i int, k string) {
	var waits atomic.Int32
	short := newLocker(t, servers.Nodes(t), Strategies()[2], core.WithQuorum(servers.Len()), core.WithTries(3),
		core.WithTTL(time.Second), core.WithObserver(waitCounter{&waits}))
	require.NoError(t, servers.Stop(i))
	require.NoError(t, servers.Start(i))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lock, err := short.Acquire(wctx, k)
	require.NoError(t, err, "Acquire waits out the guard")
	assert.Positive(t, waits.Load(), "and said it would")
	require.NoError(t, lock.Release(ctx))
}
