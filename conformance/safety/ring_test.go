package safety_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/conformance/safety"
)

// reach says, for each client and node, whether a PING through the
// client's connection to the node comes back within 300 ms; all at once.
func reach(t *testing.T, conns [][]*redis.Client) [][]bool {
	out := make([][]bool, len(conns))
	var wg sync.WaitGroup
	for c := range conns {
		out[c] = make([]bool, len(conns[c]))
		for n, rc := range conns[c] {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				out[c][n] = rc.Ping(ctx).Err() == nil
			})
		}
	}
	wg.Wait()
	return out
}

// TestRingPartitions shows the majorities ring cuts each client off from
// the nodes outside its own majority, and from those only, while it is
// on; that the clients' majorities differ and pairwise overlap; that the
// shared proxies are untouched; and that every client reaches every node
// once it is healed.
func TestRingPartitions(t *testing.T) {
	redistest.RequireServer(t)
	const nodes, clients = 5, 7 // clients 5 and 6 wrap around
	rig, err := safety.StartRig(t.Context(), nodes)
	require.NoError(t, err)
	defer func() { require.NoError(t, rig.Close()) }()

	conns := make([][]*redis.Client, clients)
	for c := range conns {
		addrs, err := rig.ClientAddrs(c)
		require.NoError(t, err)
		require.Len(t, addrs, nodes)
		for _, addr := range addrs {
			rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rc.Close() })
			conns[c] = append(conns[c], rc)
		}
	}
	shared := make([]*redis.Client, nodes)
	for n, addr := range rig.Addrs() {
		shared[n] = redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = shared[n].Close() })
	}
	all := func(why string) {
		for c, row := range reach(t, conns) {
			for n, ok := range row {
				assert.True(t, ok, "%s: client %d reaches node %d", why, c, n)
			}
		}
	}
	all("before the ring")

	require.NoError(t, rig.Ring(true))
	seen := map[[nodes]bool]bool{}
	var majorities [][nodes]bool
	matrix := reach(t, conns)
	for c := range conns {
		var reached [nodes]bool
		count := 0
		for n := range nodes {
			reached[n] = matrix[c][n]
			assert.Equal(t, safety.RingReach(c, n, nodes), reached[n], "client %d, node %d", c, n)
			if reached[n] {
				count++
			}
		}
		assert.Equal(t, nodes/2+1, count, "client %d reaches a bare majority", c)
		if c < nodes {
			assert.False(t, seen[reached], "client %d sees a majority of its own", c)
		}
		seen[reached] = true
		majorities = append(majorities, reached)
	}
	for a := range majorities {
		for b := range a {
			common := false
			for n := range nodes {
				common = common || (majorities[a][n] && majorities[b][n])
			}
			assert.True(t, common, "clients %d and %d share a node", a, b)
		}
	}
	for n, ok := range reach(t, [][]*redis.Client{shared})[0] {
		assert.True(t, ok, "the shared proxy of node %d is untouched", n)
	}

	require.NoError(t, rig.Ring(false))
	all("after the ring")
}
