package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// ClusterServers is implemented by the Servers of a harness whose every
// server is a Redis Cluster of several masters (one node of the backend
// reaches one whole cluster). Run detects it and adds the Cluster group.
// Server-level faults (Stop, Start, Pause, Resume) act on every master of
// a cluster; KillMaster takes one master down.
type ClusterServers interface {
	Servers
	// Masters is the number of masters of each cluster.
	Masters() int
	// KeySlot returns key's hash slot as cluster i computes it
	// (CLUSTER KEYSLOT).
	KeySlot(ctx context.Context, i int, key string) (int, error)
	// MasterOf returns which master of cluster i serves key, numbered from
	// 0 to Masters()-1.
	MasterOf(ctx context.Context, i int, key string) (int, error)
	// KillMaster kills master m of cluster i (SIGKILL); the other masters
	// keep serving their slots. Isolated servers only.
	KillMaster(i, m int) error
}

// runCluster checks what only a Redis Cluster behind a node can get wrong.
func runCluster(t *testing.T, h Harness) {
	checks := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"KeysOverEveryMaster", keysOverEveryMaster},
		{"OneSlotPerLock", oneSlotPerLock},
		{"KilledMaster", killedMaster},
		{"KilledMasterInOneOfThree", killedMasterInOneOfThree},
		{"KilledIdentityMaster", killedIdentityMaster},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

func clusterServers(t *testing.T, s Servers) ClusterServers {
	t.Helper()
	cs, ok := s.(ClusterServers)
	require.True(t, ok, "conformance: the harness gave cluster servers once and plain ones now (%T)", s)
	return cs
}

// keysByMaster returns, for each master of cluster i, count keys (from
// base) that it serves.
func keysByMaster(t *testing.T, s ClusterServers, i int, base string, count int) [][]string {
	t.Helper()
	out := make([][]string, s.Masters())
	full := 0
	for j := 0; full < len(out); j++ {
		require.Less(t, j, 1000*count*len(out), "no keys found for every master: %v", out)
		k := fmt.Sprintf("%s:%d", base, j)
		m, err := s.MasterOf(t.Context(), i, k)
		require.NoError(t, err)
		if len(out[m]) < count {
			out[m] = append(out[m], k)
			if len(out[m]) == count {
				full++
			}
		}
	}
	return out
}

// keysOverEveryMaster takes, extends and releases locks whose keys fall on
// every master, so the node's client must route by slot (following the
// cluster's map, not one connection).
func keysOverEveryMaster(t *testing.T, h Harness) {
	s := clusterServers(t, h.Shared(t, 1))
	l := newLocker(t, s.Nodes(t), Strategies()[0])
	ctx := t.Context()
	for m, ks := range keysByMaster(t, s, 0, key(t), 8) {
		for _, k := range ks {
			lock, err := l.TryAcquire(ctx, k)
			require.NoError(t, err, "key %s on master %d", k, m)
			assert.Equal(t, []string{lock.Value()}, valuesOf(t, s, k), "key %s on master %d", k, m)
			require.NoError(t, lock.Extend(ctx), "key %s on master %d", k, m)
			require.NoError(t, lock.Release(ctx), "key %s on master %d", k, m)
			assert.Equal(t, []string{""}, valuesOf(t, s, k), "key %s on master %d", k, m)
		}
	}
}

// slotRecorder is a node that records the keys of each call, to check that
// every call of one lock stays in one hash slot.
type slotRecorder struct {
	core.Node
	mu    sync.Mutex
	calls [][]string
}

func (r *slotRecorder) record(keys ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, keys)
}

func (r *slotRecorder) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	r.record(key)
	return r.Node.SetNX(ctx, key, value, ttl)
}

func (r *slotRecorder) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	r.record(keys...)
	return r.Node.EvalSHA(ctx, sha, keys, args)
}

func (r *slotRecorder) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	r.record(keys...)
	return r.Node.Eval(ctx, script, keys, args)
}

// oneSlotPerLock checks that every key the protocol touches for one lock
// hashes to one slot, by core's reckoning and by the cluster's, with and
// without hash tags in the key and in the Locker's key prefix.
func oneSlotPerLock(t *testing.T, h Harness) {
	s := clusterServers(t, h.Shared(t, 1))
	ctx := t.Context()
	base := key(t)
	lockKeys := []string{
		base,
		"{" + base + "}:tagged",
		"a{" + base + "}b{c}",
		"{}" + base,         // an empty tag does not count: the whole key hashes
		base + "{",          // no closing brace: no tag
		"}{" + base + "}{x", // the first complete tag counts
	}
	for _, prefix := range []string{"", "app:", "{tenant-" + base + "}:"} {
		rec := &slotRecorder{Node: s.Nodes(t)[0]}
		l := newLocker(t, []core.Node{rec}, Strategies()[0], core.WithKeyPrefix(prefix))
		for _, k := range lockKeys {
			lock, err := l.TryAcquire(ctx, k)
			require.NoError(t, err, "key %q prefix %q", k, prefix)
			require.NoError(t, lock.Extend(ctx))
			require.NoError(t, lock.Release(ctx))

			rec.mu.Lock()
			calls := rec.calls
			rec.calls = nil
			rec.mu.Unlock()
			require.GreaterOrEqual(t, len(calls), 3, "acquire, extend and release each call the node")
			server, err := s.KeySlot(ctx, 0, prefix+k)
			require.NoError(t, err)
			require.Equal(t, server, driver.HashSlot(prefix+k), "driver.HashSlot(%q) disagrees with CLUSTER KEYSLOT", prefix+k)
			for _, keys := range calls {
				if len(keys) == 1 && keys[0] == driver.IdentityKey {
					continue // the cluster's identity, asked in a call of its own
				}
				for _, ck := range keys {
					assert.Equal(t, server, driver.HashSlot(ck), "lock %q touched key %q in another slot", prefix+k, ck)
				}
			}
		}
	}
}

// killedMaster kills one master of the cluster behind a Locker's only node
// while locks are held and acquisitions run: operations on its slots fail
// with the outage error, promptly; the other masters' keys keep working.
func killedMaster(t *testing.T, h Harness) {
	s := clusterServers(t, h.Isolated(t, 1))
	const tries = 2
	l := newLocker(t, s.Nodes(t), Strategies()[0], core.WithTries(tries))
	ctx := t.Context()
	byMaster := keysByMaster(t, s, 0, key(t), 3)
	const dead = 0
	onDead, onLive := byMaster[dead], byMaster[len(byMaster)-1]

	heldDead, err := l.TryAcquire(ctx, onDead[0])
	require.NoError(t, err)
	heldLive, err := l.TryAcquire(ctx, onLive[0])
	require.NoError(t, err)

	killMidChurn(ctx, t, l, s, dead, onDead[1], onLive[1])

	// The held lock on the dead master: extension and release report the
	// outage, within the node timeout per try.
	for name, op := range map[string]func(context.Context) error{
		"Extend":  heldDead.Extend,
		"Release": heldDead.Release,
	} {
		start := time.Now()
		err := returnsWithin(t, 10*time.Second, func() error { return op(ctx) })
		require.Error(t, err, "%s of a lock whose master is dead", name)
		assert.True(t, errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrNotHeld),
			"%s: want the outage error (or not held, once the lock is known lost): %v", name, err)
		assert.Less(t, time.Since(start), 2*testNodeTimeout+time.Second, name)
	}
	start := time.Now()
	_, err = returnsWithinLock(t, func() (*core.Lock, error) { return l.Acquire(ctx, onDead[2]) })
	require.ErrorIs(t, err, core.ErrUnavailable, "a key on the dead master")
	assert.NotErrorIs(t, err, core.ErrNotAcquired, "an outage is not contention")
	assert.Less(t, time.Since(start), tries*(2*testNodeTimeout+testRetryMax)+time.Second)

	// The lock on a surviving master is untouched.
	require.NoError(t, heldLive.Extend(ctx))
	require.NoError(t, heldLive.Release(ctx))
	lock, err := l.TryAcquire(ctx, onLive[2])
	require.NoError(t, err, "a key on a surviving master")
	require.NoError(t, lock.Release(ctx))
}

// killMidChurn has two workers lock and unlock, through l, deadKey (on
// master dead of s's cluster 0) and liveKey (on a surviving master), and
// kills master dead once both have succeeded: liveKey keeps working,
// deadKey fails with the outage error only, and the workers stop promptly.
func killMidChurn(ctx context.Context, t *testing.T, l *core.Locker, s ClusterServers, dead int, deadKey, liveKey string) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var deadOK, liveOK, liveAfterKill atomic.Int64
	var killed atomic.Bool
	var unexpected sync.Map
	wg.Go(func() { churn(ctx, l, deadKey, stop, true, func() { deadOK.Add(1) }, &unexpected) })
	wg.Go(func() {
		churn(ctx, l, liveKey, stop, false, func() {
			liveOK.Add(1)
			if killed.Load() {
				liveAfterKill.Add(1)
			}
		}, &unexpected)
	})
	require.Eventually(t, func() bool { return deadOK.Load() > 0 && liveOK.Load() > 0 },
		10*time.Second, 5*time.Millisecond, "workers running")

	require.NoError(t, s.KillMaster(0, dead))
	killed.Store(true)
	require.Eventually(t, func() bool { return liveAfterKill.Load() >= 10 },
		10*time.Second, 5*time.Millisecond, "the surviving master's key keeps working")
	close(stop)
	require.NoError(t, returnsWithin(t, 10*time.Second, func() error { wg.Wait(); return nil }), "workers must not hang")
	unexpected.Range(func(k, err any) bool {
		t.Errorf("key %v: unexpected error %v", k, err)
		return true
	})
}

// churn locks and unlocks k through l until stop is closed, calling ok
// after each success. An error is stored in unexpected under k, unless
// outage allows the outage error (core.ErrUnavailable).
func churn(ctx context.Context, l *core.Locker, k string, stop <-chan struct{}, outage bool, ok func(), unexpected *sync.Map) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		lock, err := l.TryAcquire(ctx, k)
		if err == nil {
			err = lock.Release(ctx)
		}
		switch {
		case err == nil:
			ok()
		case outage && errors.Is(err, core.ErrUnavailable):
		default:
			unexpected.Store(k, err)
		}
	}
}

// killedMasterInOneOfThree runs a Locker over three independent clusters
// and kills the master serving the key in one of them: the other two
// clusters are a quorum, so the lock is still taken, extended and released.
// With the key's master dead in a second cluster too, it is an outage.
func killedMasterInOneOfThree(t *testing.T, h Harness) {
	s := clusterServers(t, h.Isolated(t, 3))
	l := newLocker(t, s.Nodes(t), Strategies()[0], core.WithTries(2))
	ctx, k := t.Context(), key(t)
	lock, err := l.TryAcquire(ctx, k)
	require.NoError(t, err)

	m0, err := s.MasterOf(ctx, 0, k)
	require.NoError(t, err)
	require.NoError(t, s.KillMaster(0, m0))
	require.NoError(t, returnsWithin(t, 10*time.Second, func() error { return lock.Extend(ctx) }),
		"two clusters of three are a quorum")
	require.NoError(t, returnsWithin(t, 10*time.Second, func() error { return lock.Release(ctx) }))

	lock, err = returnsWithinLock(t, func() (*core.Lock, error) { return l.Acquire(ctx, k) })
	require.NoError(t, err, "two clusters of three are a quorum")
	for i := 1; i < 3; i++ {
		v, _, _, err := s.Get(ctx, i, k)
		require.NoError(t, err)
		assert.Equal(t, lock.Value(), v, "cluster %d", i)
	}
	require.NoError(t, lock.Release(ctx))

	m1, err := s.MasterOf(ctx, 1, k)
	require.NoError(t, err)
	require.NoError(t, s.KillMaster(1, m1))
	_, err = returnsWithinLock(t, func() (*core.Lock, error) { return l.Acquire(ctx, k) })
	require.ErrorIs(t, err, core.ErrUnavailable, "one cluster of three cannot make a quorum")
}

// killedIdentityMaster kills the master that holds the cluster's identity
// (driver.IdentityKey's slot) once the Locker knows the cluster: the keys of
// the other masters keep working, failures on the dead master's slots
// included, since a cluster's failures do not make core ask its identity
// again.
func killedIdentityMaster(t *testing.T, h Harness) {
	s := clusterServers(t, h.Isolated(t, 1))
	l := newLocker(t, s.Nodes(t), Strategies()[0], core.WithTries(2))
	ctx := t.Context()
	m, err := s.MasterOf(ctx, 0, driver.IdentityKey)
	require.NoError(t, err)
	byMaster := keysByMaster(t, s, 0, key(t), 1)
	live := byMaster[(m+1)%len(byMaster)][0]
	lock, err := l.TryAcquire(ctx, live)
	require.NoError(t, err, "the Locker's first contact: the identity is asked")
	require.NoError(t, lock.Release(ctx))

	require.NoError(t, s.KillMaster(0, m))
	_, err = returnsWithinLock(t, func() (*core.Lock, error) { return l.TryAcquire(ctx, byMaster[m][0]) })
	require.ErrorIs(t, err, core.ErrUnavailable, "a key on the dead master")
	lock, err = returnsWithinLock(t, func() (*core.Lock, error) { return l.TryAcquire(ctx, live) })
	require.NoError(t, err, "a key on a surviving master")
	require.NoError(t, lock.Extend(ctx))
	require.NoError(t, lock.Release(ctx))
}

func returnsWithinLock(t *testing.T, fn func() (*core.Lock, error)) (*core.Lock, error) {
	t.Helper()
	var lock *core.Lock
	err := returnsWithin(t, 10*time.Second, func() (err error) {
		lock, err = fn()
		return err
	})
	return lock, err
}

// Sharded forwards driver.Sharded, so that the restart guard sees the node
// it wraps as it is.
func (r *slotRecorder) Sharded() bool {
	s, ok := r.Node.(driver.Sharded)
	return ok && s.Sharded()
}
