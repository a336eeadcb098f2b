package conformance

import (
	"fmt"
	"strings"
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

// runMultiKey checks multi-key locks (Locker.AcquireAll) over n nodes of
// the backend: exclusion between overlapping sets, no key left by a
// refused or released set, and conflicts with the other kinds.
func runMultiKey(t *testing.T, h Harness, n int, s Strategy) {
	runKindChecks(t, h, n, s, []kindCheck{
		{"OverlappingSetsExclude", overlappingSetsExclude, true},
		{"RefusedSetLeavesNoKey", refusedSetLeavesNoKey, false},
		{"ReleasedSetLeavesNoKey", releasedSetLeavesNoKey, false},
		{"OtherKindsConflict", setConflictsWithOtherKinds, false},
	})
}

// setKeys returns one key per name from base, all in one hash slot when
// the servers are Redis Clusters (a set must share a slot there), and
// without a hash tag otherwise.
func setKeys(servers Servers, base string, names ...string) []string {
	_, cluster := servers.(ClusterServers)
	out := make([]string, len(names))
	for i, name := range names {
		if cluster {
			out[i] = "{" + base + "}:" + name
		} else {
			out[i] = base + ":" + name
		}
	}
	return out
}

// pick returns the keys of ks at the indexes of set.
func pick(ks []string, set []int) []string {
	out := make([]string, len(set))
	for j, i := range set {
		out[j] = ks[i]
	}
	return out
}

// overlappingSetsExclude has one goroutine per set of {a,b}, {b,c},
// {c,a}, {a}, {b} and {c}, through two Lockers, take its set and, inside,
// mark each of its keys occupied and increment each key's counter with a
// read, an extension of the lock (a round trip) and a write: a holder
// that finds one of its keys occupied is a violation, and any overlap of
// two holders of a key can lose an increment.
func overlappingSetsExclude(t *testing.T, h Harness, n int, s Strategy) {
	const increments = 8
	servers := h.Shared(t, n)
	ks := setKeys(servers, key(t), "a", "b", "c")
	sets := [][]int{{0, 1}, {1, 2}, {2, 0}, {0}, {1}, {2}}
	lockers := contenders(t, servers, s, 2)
	ctx := t.Context()
	var (
		inside, counts [3]atomic.Int64
		violations     atomic.Int64
		wg             sync.WaitGroup
	)
	for g, set := range sets {
		l := lockers[g%len(lockers)]
		wg.Go(func() {
			for range increments {
				lock, err := l.AcquireAll(ctx, pick(ks, set)...)
				if !assert.NoError(t, err, "set %v", pick(ks, set)) {
					return
				}
				var before [3]int64
				for _, i := range set {
					if inside[i].Add(1) != 1 {
						violations.Add(1)
					}
					before[i] = counts[i].Load()
				}
				assert.NoError(t, lock.Extend(ctx), "a held set extends")
				for _, i := range set {
					counts[i].Store(before[i] + 1)
					inside[i].Add(-1)
				}
				assert.NoError(t, lock.Release(ctx))
			}
		})
	}
	wg.Wait()
	assert.Zero(t, violations.Load(), "holders of overlapping sets were inside at once")
	for i, k := range ks {
		assert.Equal(t, int64(3*increments), counts[i].Load(), "key %q: lost increments, two holders overlapped", k)
	}
}

// contenders returns count Lockers over servers for contention checks:
// unbounded tries, and waits long enough not to burn the CPU on rounds
// that cannot win (see counterRace).
func contenders(t *testing.T, servers Servers, s Strategy, count int, opts ...core.Option) []*core.Locker {
	out := make([]*core.Locker, count)
	for i := range out {
		all := append([]core.Option{core.WithTries(1_000_000),
			core.WithRetryDelay(strategies.JitterDelay(10*time.Millisecond, 50*time.Millisecond))}, opts...)
		out[i] = newLocker(t, servers.Nodes(t), s, all...)
	}
	return out
}

// refusedSetLeavesNoKey has a set refused, first by rivals on one of its
// keys on a quorum, then by a rival on a different key on each server (so
// that every node refuses it), then by a rival set that overlaps it: no
// key of the refused set may be left on any server, and the rivals stay.
func refusedSetLeavesNoKey(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	ctx := t.Context()
	ks := setKeys(servers, key(t), "a", "b", "c")

	for i := range quorumOf(n) {
		require.NoError(t, servers.Set(ctx, i, ks[1], "rival", time.Minute))
	}
	_, err := l.TryAcquireAll(ctx, ks...)
	require.ErrorIs(t, err, core.ErrNotAcquired, "a set with a key held on a quorum is refused")
	assert.NotErrorIs(t, err, core.ErrUnavailable, "contention is not an outage")
	want := repeat("", n)
	for i := range quorumOf(n) {
		want[i] = "rival"
	}
	assertKeys(t, servers, ks, [][]string{repeat("", n), want, repeat("", n)})
	clearKeys(t, servers, ks)

	// Server i holds a rival on key i mod 3: every node refuses the set.
	rivals := make([][]string, len(ks))
	for j := range ks {
		rivals[j] = repeat("", n)
	}
	for i := range n {
		require.NoError(t, servers.Set(ctx, i, ks[i%len(ks)], "rival", time.Minute))
		rivals[i%len(ks)][i] = "rival"
	}
	_, err = l.TryAcquireAll(ctx, ks...)
	require.ErrorIs(t, err, core.ErrNotAcquired, "a set with a key held on every server is refused")
	assertKeys(t, servers, ks, rivals)
	clearKeys(t, servers, ks)

	other := newLocker(t, servers.Nodes(t), s)
	held, err := other.TryAcquireAll(ctx, ks[1], ks[2])
	require.NoError(t, err)
	_, err = l.TryAcquireAll(ctx, ks[0], ks[1])
	require.ErrorIs(t, err, core.ErrNotAcquired, "sets {a,b} and {b,c} overlap")
	assert.Equal(t, repeat("", n), valuesOf(t, servers, ks[0]), "no partial grant")
	assertHeld(t, servers, held.Value(), ks[1:]...)
	require.NoError(t, held.Release(ctx))
	lock, err := l.TryAcquireAll(ctx, ks...)
	require.NoError(t, err, "the set is free once the rivals are gone")
	require.NoError(t, lock.Release(ctx))
	assertKeys(t, servers, ks, [][]string{repeat("", n), repeat("", n), repeat("", n)})
}

// assertKeys checks that each key of ks holds, on each server, the value
// of want (want[j][i] for key j on server i; "" for absent).
func assertKeys(t *testing.T, servers Servers, ks []string, want [][]string) {
	t.Helper()
	for j, k := range ks {
		assert.Equal(t, want[j], valuesOf(t, servers, k), "key %q on each server", k)
	}
}

// assertHeld checks that each key of ks holds v on a quorum of servers,
// and nothing on the others: what an uncontended lock leaves, whether its
// strategy stops at a quorum or not.
func assertHeld(t *testing.T, servers Servers, v string, ks ...string) {
	t.Helper()
	for _, k := range ks {
		values := valuesOf(t, servers, k)
		held := 0
		for i, got := range values {
			if got != "" {
				assert.Equal(t, v, got, "key %q on server %d", k, i)
				held++
			}
		}
		assert.GreaterOrEqual(t, held, quorumOf(servers.Len()), "key %q must be held on a quorum: %q", k, values)
	}
}

// clearKeys deletes every key of ks from every server.
func clearKeys(t *testing.T, servers Servers, ks []string) {
	t.Helper()
	for i := range servers.Len() {
		for _, k := range ks {
			require.NoError(t, servers.Del(t.Context(), i, k))
		}
	}
}

// releasedSetLeavesNoKey takes a set given out of order: it holds its keys
// sorted, each with the lock's value on every server, keeps out a plain
// lock, a reader and another set on any of them, and its release leaves
// no key. Sets the protocol cannot take are refused up front.
func releasedSetLeavesNoKey(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	ctx := t.Context()
	ks := setKeys(servers, key(t), "a", "b", "c", "d")

	lock, err := l.AcquireAll(ctx, ks[2], ks[0], ks[1])
	require.NoError(t, err)
	assert.Equal(t, ks[:3], lock.Keys(), "the keys in canonical order")
	assert.Equal(t, strings.Join(ks[:3], ","), lock.Key())
	assert.False(t, lock.Shared())
	assert.Positive(t, lock.Validity())
	assertHeld(t, servers, lock.Value(), ks[:3]...)
	assert.Equal(t, repeat("", n), valuesOf(t, servers, ks[3]))

	_, err = l.TryAcquire(ctx, ks[1])
	require.ErrorIs(t, err, core.ErrNotAcquired, "a plain lock on a key of a held set")
	_, err = l.TryAcquireShared(ctx, ks[2])
	require.ErrorIs(t, err, core.ErrNotAcquired, "a reader on a key of a held set")
	_, err = l.TryAcquireAll(ctx, ks[3], ks[0])
	require.ErrorIs(t, err, core.ErrNotAcquired, "a set overlapping a held set")
	assertHeld(t, servers, lock.Value(), ks[:3]...)
	assert.Equal(t, repeat("", n), valuesOf(t, servers, ks[3]), "no partial grant")

	require.NoError(t, lock.Release(ctx))
	assertKeys(t, servers, ks, [][]string{repeat("", n), repeat("", n), repeat("", n), repeat("", n)})
	assert.Zero(t, lock.Validity())

	for _, bad := range [][]string{nil, {ks[0], ks[0]}, {ks[0], ""}} {
		_, err = l.TryAcquireAll(ctx, bad...)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "set %q", bad)
	}
	if cs, cluster := servers.(ClusterServers); cluster {
		crossSlotRefused(t, l, cs)
	}
}

// crossSlotRefused checks that keys in different slots of a Redis
// Cluster are refused up front, before any node is asked.
func crossSlotRefused(t *testing.T, l *core.Locker, cs ClusterServers) {
	t.Helper()
	ctx, base := t.Context(), key(t)
	first, err := cs.KeySlot(ctx, 0, base+":0")
	require.NoError(t, err)
	for i := 1; i < 100; i++ {
		k := fmt.Sprintf("%s:%d", base, i)
		slot, err := cs.KeySlot(ctx, 0, k)
		require.NoError(t, err)
		if slot == first {
			continue
		}
		_, err = l.TryAcquireAll(ctx, base+":0", k)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "keys in slots %d and %d", first, slot)
		assert.Contains(t, err.Error(), "hash tag", "the error gives the advice")
		assert.Equal(t, repeat("", cs.Len()), valuesOf(t, cs, base+":0"), "no node was asked")
		return
	}
	t.Fatal("no two keys in different slots found")
}

// setConflictsWithOtherKinds checks a set against the other kinds on its
// keys: a reader or a plain lock on one of its keys refuses it, leaving
// none of its keys, and a held set refuses them, leaving no reader.
func setConflictsWithOtherKinds(t *testing.T, h Harness, n int, s Strategy) {
	servers := h.Shared(t, n)
	l := newLocker(t, servers.Nodes(t), s)
	other := newLocker(t, servers.Nodes(t), s)
	ctx := t.Context()
	ks := setKeys(servers, key(t), "a", "b")

	reader, err := other.TryAcquireShared(ctx, ks[1])
	require.NoError(t, err)
	_, err = l.TryAcquireAll(ctx, ks...)
	require.ErrorIs(t, err, core.ErrNotAcquired, "a reader holds a key of the set")
	assert.Equal(t, repeat("", n), valuesOf(t, servers, ks[0]), "no partial grant")
	require.NoError(t, reader.Release(ctx))

	writer, err := other.TryAcquire(ctx, ks[0])
	require.NoError(t, err)
	_, err = l.TryAcquireAll(ctx, ks...)
	require.ErrorIs(t, err, core.ErrNotAcquired, "a plain lock holds a key of the set")
	assert.Equal(t, repeat("", n), valuesOf(t, servers, ks[1]), "no partial grant")
	require.NoError(t, writer.Release(ctx))

	set, err := l.TryAcquireAll(ctx, ks...)
	require.NoError(t, err)
	_, err = other.TryAcquireShared(ctx, ks[1])
	require.ErrorIs(t, err, core.ErrNotAcquired, "a set holds the key")
	assertHeld(t, servers, set.Value(), ks...)
	readers, ok := driver.ReadersKey(ks[1])
	require.True(t, ok)
	// A readers set left behind fails GET with WRONGTYPE on Redis.
	assert.Equal(t, repeat("", n), valuesOf(t, servers, readers), "no reader left by the refused one")
	require.NoError(t, set.Release(ctx))
	assertKeys(t, servers, ks, [][]string{repeat("", n), repeat("", n)})
}
