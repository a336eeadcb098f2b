package goredis_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance/misuse"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// The subtests of TestTopologyGoRedis are rows of the table of client types
// of docs/topologies.md (TestReadmeTopologyTable, in core, checks that each
// one is named there, and that each test named there exists).

// Stable parts of New's refusals.
const (
	refusedRing     = " is a *redis.Ring, which moves a key to another shard when one misses heartbeats, so one lock key can live on two servers over time: two holders"
	refusedFailover = "quorumlock: invalid argument: goredis: a Sentinel failover client (redis.NewFailoverClient, or redis.NewUniversalClient with MasterName) " +
		"moves to a promoted replica when its master fails"
	refusedSlots = "quorumlock: invalid argument: goredis: a *redis.ClusterClient whose slot map comes from ClusterSlots"
	advice       = "give each independent master (not its replicas) as its own node: one *redis.Client per master"
)

// requireRefused checks that New refuses client as not one Redlock node.
func requireRefused(t *testing.T, client goredis.Client, msg string) {
	t.Helper()
	n, err := goredis.New(client)
	require.Nil(t, n)
	misuse.RequireMisuse(t, err, core.ErrInvalidArgument, msg)
	require.ErrorContains(t, err, advice)
}

func TestTopologyGoRedis(t *testing.T) {
	t.Run("ring", func(t *testing.T) {
		t.Parallel()
		a, b := startServer(t), startServer(t)
		ring := redis.NewRing(&redis.RingOptions{
			Addrs:                 map[string]string{"a": a.Addr(), "b": b.Addr()},
			ContextTimeoutEnabled: true,
		})
		defer ring.Close()
		require.NoError(t, ring.ForEachShard(t.Context(), func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }),
			"a ring over two live servers")
		want := "quorumlock: invalid argument: goredis: client ring:" + strings.Join(slices.Sorted(slices.Values([]string{a.Addr(), b.Addr()})), ",") + refusedRing
		requireRefused(t, ring, want)
		requireRefused(t, redis.UniversalClient(ring), want)
	})
	t.Run("wrapped_ring", func(t *testing.T) {
		t.Parallel()
		a, b := startServer(t), startServer(t)
		ring := redis.NewRing(&redis.RingOptions{
			Addrs:                 map[string]string{"a": a.Addr(), "b": b.Addr()},
			ContextTimeoutEnabled: true,
		})
		defer ring.Close()
		// A type that embeds the ring promotes its Options method, which
		// tells New what it is.
		type instrumented struct{ *redis.Ring }
		requireRefused(t, instrumented{ring}, refusedRing)
	})
	t.Run("failover_client", func(t *testing.T) {
		t.Parallel()
		// go-redis asks Sentinel for the master only when it dials, so
		// New refuses the client before any network call.
		f := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            "mymaster",
			SentinelAddrs:         []string{redistest.DeadAddr(t)},
			ContextTimeoutEnabled: true,
		})
		defer f.Close()
		requireRefused(t, f, refusedFailover)

		u := redis.NewUniversalClient(&redis.UniversalOptions{
			MasterName:            "mymaster",
			Addrs:                 []string{redistest.DeadAddr(t)},
			ContextTimeoutEnabled: true,
		})
		defer u.Close()
		require.IsType(t, (*redis.Client)(nil), u, "a universal client with MasterName is a failover *redis.Client")
		requireRefused(t, u, refusedFailover)
	})
	t.Run("failover_cluster_client", func(t *testing.T) {
		t.Parallel()
		f := redis.NewFailoverClusterClient(&redis.FailoverOptions{
			MasterName:            "mymaster",
			SentinelAddrs:         []string{redistest.DeadAddr(t)},
			RouteRandomly:         true,
			ContextTimeoutEnabled: true,
		})
		defer f.Close()
		requireRefused(t, f, refusedSlots)

		u := redis.NewUniversalClient(&redis.UniversalOptions{
			MasterName:            "mymaster",
			Addrs:                 []string{redistest.DeadAddr(t)},
			RouteByLatency:        true,
			ContextTimeoutEnabled: true,
		})
		defer u.Close()
		require.IsType(t, (*redis.ClusterClient)(nil), u, "a universal client with MasterName and RouteByLatency is a failover cluster client")
		requireRefused(t, u, refusedSlots)
	})
	t.Run("cluster_slots_client", func(t *testing.T) {
		t.Parallel()
		// Two independent servers made into a cluster client by a slot
		// map of the caller's: nothing on the servers checks it.
		a, b := startServer(t), startServer(t)
		c := redis.NewClusterClient(&redis.ClusterOptions{
			ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
				return []redis.ClusterSlot{
					{Start: 0, End: 8191, Nodes: []redis.ClusterNode{{Addr: a.Addr()}}},
					{Start: 8192, End: 16383, Nodes: []redis.ClusterNode{{Addr: b.Addr()}}},
				}, nil
			},
			ContextTimeoutEnabled: true,
		})
		defer c.Close()
		require.NoError(t, c.Set(t.Context(), "k", "v", time.Minute).Err(), "the client works over its servers")
		requireRefused(t, c, refusedSlots)
	})
	t.Run("failover_conn_not_detected", func(t *testing.T) {
		t.Parallel()
		// A *redis.Conn keeps no options that tell where it dials: one
		// taken from a failover client cannot be told apart, and is
		// accepted. Give New the client itself.
		f := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            "mymaster",
			SentinelAddrs:         []string{redistest.DeadAddr(t)},
			ContextTimeoutEnabled: true,
		})
		defer f.Close()
		conn := f.Conn()
		defer conn.Close()
		n, err := goredis.New(conn)
		require.NoError(t, err)
		assert.Equal(t, "*redis.Conn", n.String())
	})
	t.Run("universal_client_of_one_server", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		u := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{s.Addr()}, ContextTimeoutEnabled: true})
		defer u.Close()
		require.IsType(t, (*redis.Client)(nil), u)
		n, err := goredis.New(u)
		require.NoError(t, err)
		assert.Equal(t, s.Addr(), n.String())
		assert.False(t, n.Sharded(), "one server: the restart guard watches it")
		requireLockCycle(t, n, "orders:42")
	})
	t.Run("cluster_client_reading_from_replicas", func(t *testing.T) {
		t.Parallel()
		// ReadOnly (which RouteByLatency and RouteRandomly turn on) sends
		// the commands Redis flags read-only to replicas; SET, EVAL and
		// EVALSHA are not, and go to the slot's master.
		redistest.RequireServer(t)
		ctx := t.Context()
		c, err := redistest.StartCluster(ctx, 1)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, c.Close()) })
		master := c.Masters()[0]
		replica := startClusterReplica(t, master)

		o := goredis.ClusterOptions(c.Addrs()...)
		o.ReadOnly = true
		rdb := redis.NewClusterClient(o)
		defer rdb.Close()
		n, err := goredis.New(rdb)
		require.NoError(t, err)
		assert.True(t, n.Sharded())

		const key = "orders:42"
		requireLockCycle(t, n, key)
		for range 3 {
			require.ErrorIs(t, rdb.Get(ctx, key).Err(), redis.Nil)
		}
		stats := commandStats(t, replica.Addr())
		assert.Equal(t, 3, stats["get"]["calls"], "read-only commands went to the replica: %v", stats)
		for _, cmd := range []string{"eval", "evalsha"} {
			assert.NotContains(t, stats, cmd, "no script ran on the replica")
		}
		assert.Zero(t, stats["set"]["rejected_calls"]+stats["set"]["failed_calls"], "no SET was sent to the replica: %v", stats["set"])
		ms := commandStats(t, master.Addr())
		assert.Positive(t, ms["eval"]["calls"]+ms["evalsha"]["calls"], "the scripts ran on the master: %v", ms)
	})
}

// requireLockCycle acquires key on n alone, extends the lock and releases
// it, over a Locker of that one node.
func requireLockCycle(t *testing.T, n core.Node, key string) {
	t.Helper()
	l, err := core.New([]core.Node{n})
	require.NoError(t, err)
	defer func() { assert.NoError(t, l.Close()) }()
	lock, err := l.TryAcquire(t.Context(), key)
	require.NoError(t, err)
	require.NoError(t, lock.Extend(t.Context()))
	require.NoError(t, lock.Release(t.Context()))
}

// startClusterReplica starts a cluster-mode server, joins it to master's
// cluster as master's replica, and waits until master lists it among the
// servers of its slots, where a cluster client learns it from.
func startClusterReplica(t *testing.T, master *redistest.Server) *redistest.Server {
	t.Helper()
	ctx := t.Context()
	var (
		r   *redistest.Server
		err error
	)
	for range 5 {
		r, err = redistest.StartServer(ctx, redistest.WithPort(freeClusterPort(t)),
			redistest.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "3000"))
		if err == nil {
			break
		}
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.Close()) })

	mc, rc := serverClient(master.Addr()), serverClient(r.Addr())
	defer mc.Close()
	defer rc.Close()
	id, err := mc.Do(ctx, "cluster", "myid").Text()
	require.NoError(t, err)
	// The master lists a replica in CLUSTER SLOTS once the replica has
	// synchronised (by default five seconds after it asks, waiting for
	// others) and reported a replication offset above 0, which takes a
	// write or the master's replication ping (every ten seconds by
	// default).
	require.NoError(t, mc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err())
	require.NoError(t, mc.ConfigSet(ctx, "repl-ping-replica-period", "1").Err())
	require.NoError(t, rc.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(master.Port())).Err())
	// CLUSTER REPLICATE fails until the handshake has made the master known.
	require.Eventually(t, func() bool { return rc.Do(ctx, "cluster", "replicate", id).Err() == nil },
		10*time.Second, 10*time.Millisecond, "the new server never knew the master")
	require.Eventually(t, func() bool {
		//lint:ignore SA1019 go-redis's cluster client reads CLUSTER SLOTS, so wait for what it will read
		slots, err := mc.ClusterSlots(ctx).Result()
		return err == nil && len(slots) == 1 && len(slots[0].Nodes) == 2 && slots[0].Nodes[1].Addr == r.Addr()
	}, 10*time.Second, 10*time.Millisecond, "the master never listed its replica")
	return r
}

// freeClusterPort returns a free loopback port whose cluster bus port
// (port+10000) is free too.
func freeClusterPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		port, err := redistest.FreePort()
		require.NoError(t, err)
		if port+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		require.NoError(t, l.Close())
		return port
	}
	require.FailNow(t, "no free port with a free cluster bus port")
	return 0
}

// serverClient returns a client of the one server at addr.
func serverClient(addr string) *redis.Client {
	return redis.NewClient(goredis.ClientOptions(addr))
}

// commandStats returns the server's INFO commandstats: for each command,
// its counters (calls, rejected_calls, failed_calls).
func commandStats(t *testing.T, addr string) map[string]map[string]int {
	t.Helper()
	c := serverClient(addr)
	defer c.Close()
	text, err := c.Info(t.Context(), "commandstats").Result()
	require.NoError(t, err)
	stats := make(map[string]map[string]int)
	for line := range strings.Lines(text) {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		stats[cmd] = make(map[string]int)
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			if n, err := strconv.Atoi(v); err == nil { // usec_per_call is not an integer
				stats[cmd][k] = n
			}
		}
	}
	return stats
}
