package redistest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// noNodes is a NodeFactory for tests that use only the harness's own
// access to the servers.
func noNodes(string) (core.Node, func() error, error) {
	return nil, nil, errors.New("redistest: no nodes in this test")
}

// script is the script a check leaves cached.
const script = "return 7"

// dirt is what a test may leave on a server: each must be gone, or undone,
// when the server is handed to the next test.
var dirt = []struct {
	name  string
	dirty func(t *testing.T, s conformance.Servers, admin *redis.Client)
}{
	{"keys, scripts and functions", func(t *testing.T, s conformance.Servers, admin *redis.Client) {
		ctx := t.Context()
		require.NoError(t, s.Set(ctx, 0, "k", "v", 0))
		require.NoError(t, s.Set(ctx, 0, driver.IdentityKey, "someone", 0))
		require.NoError(t, s.Del(ctx, 0, driver.BirthKey))
		conn := admin.Conn()
		defer conn.Close()
		require.NoError(t, conn.Select(ctx, 3).Err())
		require.NoError(t, conn.Set(ctx, "in-db-3", "v", 0).Err())
		require.NoError(t, admin.ScriptLoad(ctx, script).Err())
		require.NoError(t, admin.FunctionLoad(ctx, "#!lua name=lib\nredis.register_function('f', function() return 1 end)").Err())
	}},
	{"paused", func(t *testing.T, s conformance.Servers, admin *redis.Client) {
		require.NoError(t, admin.Set(t.Context(), "k", "v", 0).Err())
		require.NoError(t, s.Pause(0))
	}},
	{"paused with a write in flight", func(t *testing.T, s conformance.Servers, admin *redis.Client) {
		require.NoError(t, s.Pause(0))
		// Sent to a paused server, read by it only once it is resumed.
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		require.Error(t, admin.Set(ctx, "late", "v", 0).Err())
	}},
	{"stopped", func(t *testing.T, s conformance.Servers, _ *redis.Client) {
		require.NoError(t, s.Stop(0))
	}},
	{"stopped keeping data", func(t *testing.T, s conformance.Servers, admin *redis.Client) {
		require.NoError(t, admin.Set(t.Context(), "kept", "v", 0).Err())
		require.NoError(t, s.StopKeepingData(0))
	}},
	{"restarted keeping data", func(t *testing.T, s conformance.Servers, admin *redis.Client) {
		require.NoError(t, admin.Set(t.Context(), "kept", "v", 0).Err())
		require.NoError(t, s.StopKeepingData(0))
		require.NoError(t, s.Start(0))
	}},
	{"reconfigured", func(t *testing.T, _ conformance.Servers, admin *redis.Client) {
		ctx := t.Context()
		require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
		require.NoError(t, admin.Do(ctx, "acl", "setuser", "locker", "on", ">pw", "~*", "+@all").Err())
	}},
	{"password set", func(t *testing.T, _ conformance.Servers, admin *redis.Client) {
		require.NoError(t, admin.ConfigSet(t.Context(), "requirepass", "s3cret").Err())
	}},
}

// requireNew checks that server 0 of s is as a new server of the harness
// is: running, answering, with its configuration as new (want), no key but
// the birth key of an adopted server, no script, no function, and no
// client but the caller's.
func requireNew(t *testing.T, s conformance.Servers, admin *redis.Client, want string) {
	t.Helper()
	ctx := t.Context()
	clients, err := admin.ClientList(ctx).Result()
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(clients), "\n")+1, "no client but this one: %s", clients)
	got, err := fingerprint(ctx, admin)
	require.NoError(t, err)
	require.Equal(t, want, got, "configuration and users as new")
	birth, _, ok, err := s.Get(ctx, 0, driver.BirthKey)
	require.NoError(t, err)
	assert.True(t, ok && birth == "0", "adopted for the restart guard: %q", birth)
	conn := admin.Conn()
	defer conn.Close()
	for db := range 16 {
		require.NoError(t, conn.Select(ctx, db).Err())
		keys, err := conn.Keys(ctx, "*").Result()
		require.NoError(t, err)
		if db == 0 {
			assert.Equal(t, []string{driver.BirthKey}, keys, "database 0")
		} else {
			assert.Empty(t, keys, "database %d", db)
		}
	}
	sha := sha1.Sum([]byte(script))
	exists, err := admin.ScriptExists(ctx, hex.EncodeToString(sha[:])).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, exists, "no script cached")
	libs, err := admin.FunctionList(ctx, redis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	assert.Empty(t, libs, "no function")
}

// A server that an isolated check used comes back to the next one as a
// new server is, whatever the check left on it, and it is the same
// server: the harness starts one process for the whole sequence, and
// restarts it only when its configuration changed.
func TestIsolatedServersComeBackNew(t *testing.T) {
	RequireServer(t)
	t.Parallel()
	h := Harness(noNodes)(t).(*harness)
	outer := t
	var addr, want string
	for _, d := range dirt {
		t.Run(d.name, func(t *testing.T) {
			s := h.Isolated(t, 1)
			tg := targetOf(t, s, 0)
			if addr == "" {
				addr, want = tg.addrs()[0], tg.(*single).config
			}
			require.Equal(t, addr, tg.addrs()[0], "the same server, reused")
			admin := AdminClient(t, addr)
			requireNew(t, s, admin, want)
			// A client of the test's that outlives it.
			left := plainClient(addr)
			outer.Cleanup(func() { _ = left.Close() })
			require.NoError(t, left.Ping(t.Context()).Err())
			d.dirty(t, s, admin)
		})
		h.pool.resets.Wait()
	}
	t.Run("last", func(t *testing.T) {
		s := h.Isolated(t, 1)
		require.Equal(t, addr, targetOf(t, s, 0).addrs()[0], "the same server, reused")
		requireNew(t, s, AdminClient(t, addr), want)
	})
	require.NoError(t, h.Close())
	assert.Empty(t, h.pool.all, "every server stopped")
}

// A cluster that an isolated check used comes back to the next one as a
// new cluster is: every master up, agreeing, none flagged as failing by
// the others, and empty; and it is the same cluster, formed once.
func TestIsolatedClustersComeBackNew(t *testing.T) {
	RequireServer(t)
	t.Parallel()
	h := ClusterHarness(func([]string) (core.Node, func() error, error) { return noNodes("") })(t).(*harness)
	var addrs []string
	for _, d := range []struct {
		name  string
		dirty func(t *testing.T, s *clusterServers)
	}{
		{"a master killed, with keys on every master", func(t *testing.T, s *clusterServers) {
			for i := range 30 {
				require.NoError(t, s.Set(t.Context(), 0, "k"+strconv.Itoa(i), "v", 0))
			}
			require.NoError(t, s.KillMaster(0, 1))
			// Long enough for the others to flag it as failed.
			admin := AdminClient(t, s.cluster(0).Addrs()[0])
			require.Eventually(t, func() bool {
				nodes, err := admin.ClusterNodes(t.Context()).Result()
				return err == nil && strings.Contains(nodes, ",fail ")
			}, 20*time.Second, 50*time.Millisecond)
		}},
		{"paused", func(t *testing.T, s *clusterServers) { require.NoError(t, s.Pause(0)) }},
		{"stopped", func(t *testing.T, s *clusterServers) { require.NoError(t, s.Stop(0)) }},
	} {
		t.Run(d.name, func(t *testing.T) {
			s := clustersOf(t, h.Isolated(t, 1))
			if addrs == nil {
				addrs = s.cluster(0).Addrs()
			}
			require.Equal(t, addrs, s.cluster(0).Addrs(), "the same cluster, reused")
			requireNewCluster(t, s.cluster(0))
			d.dirty(t, s)
		})
		h.pool.resets.Wait()
	}
	t.Run("last", func(t *testing.T) {
		s := clustersOf(t, h.Isolated(t, 1))
		require.Equal(t, addrs, s.cluster(0).Addrs(), "the same cluster, reused")
		requireNewCluster(t, s.cluster(0))
	})
	require.NoError(t, h.Close())
	assert.Empty(t, h.pool.all, "every cluster stopped")
}

func clustersOf(t *testing.T, s conformance.Servers) *clusterServers {
	t.Helper()
	cs, ok := s.(*clusterServers)
	require.True(t, ok, "%T", s)
	return cs
}

// requireNewCluster checks that c is as a newly formed cluster is.
func requireNewCluster(t *testing.T, c *Cluster) {
	t.Helper()
	ctx := t.Context()
	for _, m := range c.Masters() {
		require.True(t, m.Running(), m.Addr())
		admin := AdminClient(t, m.Addr())
		require.NoError(t, linksOK(ctx, admin), m.Addr())
		n, err := admin.DBSize(ctx).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "keys on %s", m.Addr())
	}
	require.NoError(t, c.unhealthy(ctx, clientsOf(t, c)))
	for i := range 30 {
		require.NoError(t, c.Control().Set(ctx, "k"+strconv.Itoa(i), "v", 0).Err(), "every master serves its slots")
	}
}

func clientsOf(t *testing.T, c *Cluster) []*redis.Client {
	out := make([]*redis.Client, len(c.Masters()))
	for m, s := range c.Masters() {
		out[m] = AdminClient(t, s.Addr())
	}
	return out
}

// TestServers hands a test's servers, once it has ended, to a later test
// of the binary, as new; SharedServers starts its servers once.
func TestTestServersComeBackNew(t *testing.T) {
	var addrs []string
	t.Run("first", func(t *testing.T) {
		list := TestServers(t, 2)
		addrs = []string{list[0].Addr(), list[1].Addr()}
		require.NoError(t, AdminClient(t, addrs[0]).Set(t.Context(), "k", "v", 0).Err())
		require.NoError(t, list[0].Pause())
		require.NoError(t, list[1].Stop())
	})
	process.mu.Lock()
	p := process.pool
	process.mu.Unlock()
	p.resets.Wait()
	t.Run("second", func(t *testing.T) {
		list := TestServers(t, 2)
		got := []string{list[0].Addr(), list[1].Addr()}
		assert.ElementsMatch(t, addrs, got, "the same servers, reused")
		for _, s := range list {
			require.True(t, s.Running())
			keys, err := AdminClient(t, s.Addr()).Keys(t.Context(), "*").Result()
			require.NoError(t, err)
			assert.Equal(t, []string{driver.BirthKey}, keys, "empty and adopted")
		}
	})
	shared := SharedServers(t, 2)
	assert.Equal(t, shared, SharedServers(t, 2), "started once")
	assert.Equal(t, shared[:1], SharedServers(t, 1))
}
