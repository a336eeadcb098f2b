package conformance_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredislib "github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"
)

// nodeMaker builds a node over addr, closed when the test ends.
type nodeMaker func(t *testing.T, addr string) core.Node

func viaGoredis(t *testing.T, addr string) core.Node {
	rdb := goredislib.NewClient(goredis.ClientOptions(addr))
	t.Cleanup(func() { assert.NoError(t, rdb.Close()) })
	n, err := goredis.New(rdb)
	require.NoError(t, err)
	return n
}

func viaRueidis(opts ...rueidis.Option) nodeMaker {
	return func(t *testing.T, addr string) core.Node {
		c, err := rueidislib.NewClient(rueidis.ClientOption(addr))
		require.NoError(t, err)
		t.Cleanup(c.Close)
		n, err := rueidis.New(c, opts...)
		require.NoError(t, err)
		return n
	}
}

// localhost spells a loopback address "127.0.0.1:port" as "localhost:port".
func localhost(addr string) string { return strings.Replace(addr, "127.0.0.1:", "localhost:", 1) }

// identityServers starts n servers, closed when the test ends.
func identityServers(t *testing.T, n int) []*redistest.Server {
	redistest.RequireServer(t)
	out := make([]*redistest.Server, n)
	for i := range out {
		s, err := redistest.StartServer(t.Context())
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		out[i] = s
	}
	return out
}

// A server has one name through every driver: go-redis and rueidis name a
// standalone client by its address, so that a Locker given one server
// through both refuses it at once, and every process picks the same
// herald.
func TestNodeNamesAcrossDrivers(t *testing.T) {
	srv := identityServers(t, 2)
	viaGo, viaRue := viaGoredis(t, srv[0].Addr()), viaRueidis()(t, srv[0].Addr())
	assert.Equal(t, srv[0].Addr(), viaGo.String())
	assert.Equal(t, viaGo.String(), viaRue.String(), "one server, one name")
	_, err := core.New([]core.Node{viaGo, viaRue, viaGoredis(t, srv[1].Addr())})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, `nodes 0 and 1 are both "`+srv[0].Addr()+`"`)
}

// The trap of issue 15 on real servers: one server listed twice, under
// names that differ, beside a second server. With the second one stopped,
// an extension that only the one server answers must fail, naming the
// duplicate; without the identity check it succeeded (compare-and-pexpire
// says yes through both names).
func TestOneServerOneVoteOnRealServers(t *testing.T) {
	for _, c := range []struct {
		name        string
		first, dup  nodeMaker
		spell       func(string) string // the duplicate's address
		other       nodeMaker
		dupNameWant func(addr string) string
	}{
		{
			name: "go-redis and rueidis, named by the user", first: viaGoredis, dup: viaRueidis(rueidis.WithName("primary")),
			spell: func(a string) string { return a }, other: viaGoredis,
			dupNameWant: func(string) string { return "primary" },
		},
		{
			name: "localhost and 127.0.0.1 through go-redis", first: viaGoredis, dup: viaGoredis,
			spell: localhost, other: viaGoredis,
			dupNameWant: localhost,
		},
		{
			name: "localhost through rueidis beside 127.0.0.1 through go-redis", first: viaGoredis, dup: viaRueidis(),
			spell: localhost, other: viaRueidis(),
			dupNameWant: localhost,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := identityServers(t, 2)
			nodes := []core.Node{c.first(t, srv[0].Addr()), c.dup(t, c.spell(srv[0].Addr())), c.other(t, srv[1].Addr())}
			l, err := core.New(nodes, core.WithStrategy(strategies.Sequential()), core.WithNodeTimeout(time.Second))
			require.NoError(t, err, "the names differ")
			t.Cleanup(func() { assert.NoError(t, l.Close()) })
			ctx := t.Context()

			lock, err := l.TryAcquire(ctx, "k")
			require.NoError(t, err)
			require.NoError(t, srv[1].StopKeepingData(ctx))
			err = lock.Extend(ctx)
			require.ErrorIs(t, err, core.ErrUnavailable, "one server must not keep the lock alone")
			require.ErrorIs(t, err, core.ErrDuplicateNode)
			assert.Contains(t, err.Error(), "node "+strconv.Quote(c.dupNameWant(srv[0].Addr()))+" is the same server")
			assert.Contains(t, err.Error(), "is the same server as node "+strconv.Quote(srv[0].Addr()))
			var qe *core.QuorumError
			require.True(t, errors.As(err, &qe))
			assert.Equal(t, []core.Outcome{core.OutcomeOK, core.OutcomeFailed, core.OutcomeFailed},
				[]core.Outcome{qe.Nodes[0].Outcome, qe.Nodes[1].Outcome, qe.Nodes[2].Outcome})
			assert.Contains(t, err.Error(), strconv.Quote(getKey(t, srv[0], driver.IdentityKey)), "the identity the server keeps")

			require.NoError(t, srv[1].Restart(ctx)) // with the lock's key
			require.NoError(t, lock.Release(ctx), "the first name and the second server are a quorum")
		})
	}
}

// getKey reads key on srv directly.
func getKey(t *testing.T, srv *redistest.Server, key string) string {
	c := goredislib.NewClient(&goredislib.Options{Addr: srv.Addr()})
	defer func() { assert.NoError(t, c.Close()) }()
	v, err := c.Get(t.Context(), key).Result()
	require.NoError(t, err)
	return v
}

// go-redis and rueidis reconnect to a restarted server without a failed
// call, so a server restarted without persistence has a new identity
// under a node that was verified: the duplicate must still be found.
func TestOneServerOneVoteAfterSilentRestart(t *testing.T) {
	srv := identityServers(t, 2)
	nodes := []core.Node{viaGoredis(t, srv[0].Addr()), viaRueidis()(t, localhost(srv[0].Addr())), viaRueidis()(t, srv[1].Addr())}
	l, err := core.New(nodes, core.WithStrategy(strategies.Sequential()), core.WithNodeTimeout(time.Second), core.WithRestartGuard(0))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	ctx := t.Context()
	lock, err := l.TryAcquire(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, lock.Extend(ctx), "the duplicate is found; the others are a quorum")
	require.NoError(t, lock.Release(ctx))
	before := getKey(t, srv[0], driver.IdentityKey)

	require.NoError(t, srv[0].Restart(ctx)) // empty: no identity, no keys
	lock, err = l.TryAcquire(ctx, "k")
	require.NoError(t, err, "no call failed: the drivers reconnected")
	require.NoError(t, srv[1].StopKeepingData(ctx))
	err = lock.Extend(ctx)
	require.ErrorIs(t, err, core.ErrUnavailable, "one server must not keep the lock alone")
	require.ErrorIs(t, err, core.ErrDuplicateNode)
	now := getKey(t, srv[0], driver.IdentityKey)
	assert.Contains(t, err.Error(), "node "+strconv.Quote(localhost(srv[0].Addr()))+" is the same server as node "+
		strconv.Quote(srv[0].Addr())+" (identity key "+driver.IdentityKey+" = "+strconv.Quote(now)+")")
	assert.NotEqual(t, before, now, "a new identity")
	require.NoError(t, srv[1].Restart(ctx))
	require.NoError(t, lock.Release(ctx))
}
