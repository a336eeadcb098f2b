package goredis

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// TestRingMovesALockKey shows why New refuses a *redis.Ring, on a node
// made without New: a shard that misses heartbeats (paused here, as a
// stalled process or a network partition would make it) is taken out of
// the ring, its keys are rehashed onto the live shards, and a second
// client wins the lock while the first still holds it. When the shard
// answers again, the key lives on two servers.
func TestRingMovesALockKey(t *testing.T) {
	redistest.RequireServer(t)
	ctx := t.Context()
	servers := make(map[string]*redistest.Server)
	shards := make(map[string]string)
	for _, name := range []string{"a", "b"} {
		s, err := redistest.StartServer(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		servers[s.Addr()] = s
		shards[name] = s.Addr()
	}
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:                 shards,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		HeartbeatFrequency:    20 * time.Millisecond,
		ReadTimeout:           100 * time.Millisecond, // bounds a heartbeat to a paused shard
	})
	defer ring.Close()
	node := &Node{client: ring, common: driver.Common{Name: "ring"}}
	lockers := make([]*core.Locker, 2)
	for i := range lockers {
		l, err := core.New([]core.Node{node}, core.WithTTL(30*time.Second))
		require.NoError(t, err)
		defer l.Close()
		lockers[i] = l
	}

	const key = "orders:42"
	first, err := lockers[0].TryAcquire(ctx, key)
	require.NoError(t, err)
	shard, err := ring.GetShardClientForKey(key)
	require.NoError(t, err)
	holder := servers[shard.Options().Addr]
	require.NoError(t, holder.Pause())
	t.Cleanup(func() { assert.NoError(t, holder.Resume()) })

	// Three failed heartbeats mark the shard down, and the ring rehashes.
	require.Eventually(t, func() bool {
		s, err := ring.GetShardClientForKey(key)
		return err == nil && s.Options().Addr != holder.Addr()
	}, 10*time.Second, 10*time.Millisecond, "the ring never took the paused shard out")
	second, err := lockers[1].TryAcquire(ctx, key)
	require.NoError(t, err, "the key moved to a shard where it is free")
	assert.Positive(t, first.Validity(), "the first holder's lock is still valid: two holders")
	assert.Positive(t, second.Validity())

	require.NoError(t, holder.Resume())
	values := make(map[string]string)
	for addr := range servers {
		c := redis.NewClient(ClientOptions(addr))
		v, err := c.Get(ctx, key).Result()
		require.NoError(t, c.Close())
		require.NoError(t, err, "the key is on %s", addr)
		values[addr] = v
	}
	assert.Len(t, values, 2)
	assert.NotEqual(t, values[shards["a"]], values[shards["b"]], "one lock key on two servers, with two holders' values")
}
