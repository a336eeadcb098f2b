package conformance_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// plainMajoritySemaphore is the unsafe counting semaphore that docs/safety.md
// warns of: each node admits K holders (a sorted set of at most ARGV[2]
// members), and a holder needs a plain majority of nodes.
const plainMajoritySemaphore = `if redis.call("zscore", KEYS[1], ARGV[1]) or redis.call("zcard", KEYS[1]) < tonumber(ARGV[2]) then
	redis.call("zadd", KEYS[1], 0, ARGV[1])
	return 1
end
return 0`

// TestPlainMajoritySemaphoreIsUnsafe builds the plain-majority semaphore
// over three redis-servers with K = 2 and drives holder A onto servers
// {1, 2}, B onto {2, 3} and C onto {1, 3} (each sees only its two): every
// server admits two, so all three hold a majority at once, one more than
// K. The same three, through TryAcquirePermit (K slot mutexes), are at
// most two: the third finds each slot held on one of its two servers.
func TestPlainMajoritySemaphoreIsUnsafe(t *testing.T) {
	const permits = 2
	servers := make([]string, 3)
	for i := range servers {
		servers[i] = redistest.StartTestServer(t).Addr()
	}
	reach := map[string][]int{"A": {0, 1}, "B": {1, 2}, "C": {0, 2}}
	ctx := t.Context()

	// Each holder's view: its two servers, and a dead address for the third.
	nodes := map[string][]core.Node{}
	for _, name := range []string{"A", "B", "C"} {
		nodes[name] = make([]core.Node, 3)
		for i := range 3 {
			addr := redistest.DeadAddr(t)
			for _, r := range reach[name] {
				if r == i {
					addr = servers[i]
				}
			}
			node, closeNode, err := goredisSingle(addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = closeNode() })
			nodes[name][i] = node
		}
	}

	unsafeHolders := 0
	for _, name := range []string{"A", "B", "C"} {
		granted := 0
		for _, i := range reach[name] {
			reply, err := nodes[name][i].Eval(ctx, plainMajoritySemaphore, []string{"unsafe-sem"}, []string{name, "2"})
			require.NoError(t, err)
			if reply == int64(1) {
				granted++
			}
		}
		if granted >= 2 { // a majority of three
			unsafeHolders++
		}
	}
	assert.Equal(t, permits+1, unsafeHolders, "the plain-majority semaphore admits K+1 holders")

	safeHolders := 0
	for _, name := range []string{"A", "B", "C"} {
		l, err := core.New(nodes[name], core.WithNodeTimeout(500*time.Millisecond), core.WithTries(1))
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, l.Close()) })
		lock, err := l.TryAcquirePermit(ctx, "safe-sem", permits)
		if err != nil {
			require.ErrorIs(t, err, core.ErrNotAcquired, "holder %s", name)
			continue
		}
		safeHolders++
		t.Cleanup(func() { _ = lock.Release(context.Background()) })
	}
	assert.Equal(t, permits, safeHolders, "K slot mutexes admit K holders, not K+1")
}
