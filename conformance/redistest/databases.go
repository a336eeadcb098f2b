package redistest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// DatabaseDialer returns a node of the backend under test that reaches the
// server at addr with database db selected (go-redis Options.DB, redigo
// DialDatabase, rueidis and valkey SelectDB), closed when t ends.
type DatabaseDialer func(t *testing.T, addr string, db int) core.Node

// RunDatabases checks that one server is one vote whatever database its
// nodes select and however their addresses are spelled, on real
// redis-servers the test starts (issue 26): a node that reaches a server
// already voting through another database is a duplicate
// (core.ErrDuplicateNode), so that server alone never wins a quorum of
// three, and a second client cannot take a lock the first holds once that
// server has lost its keys.
func RunDatabases(t *testing.T, dial DatabaseDialer) {
	for _, dbs := range [][2]int{{0, 1}, {2, 1}} {
		t.Run("databases "+strconv.Itoa(dbs[0])+" and "+strconv.Itoa(dbs[1]), func(t *testing.T) {
			t.Parallel()
			t.Run("one server wins no quorum alone", func(t *testing.T) { aloneNoQuorum(t, dial, dbs) })
			t.Run("no second holder after a flush", func(t *testing.T) { noSecondHolder(t, dial, dbs) })
		})
	}
}

// twoDatabases starts two servers and returns the addresses of three nodes
// over them, with their databases: the first server through 127.0.0.1
// with database dbs[0] and through localhost with dbs[1], then the
// second server.
func twoDatabases(t *testing.T, dbs [2]int) (addrs [3]string, db [3]int, one, two *Server) {
	one, two = StartTestServer(t), StartTestServer(t)
	spelled := strings.Replace(one.Addr(), "127.0.0.1:", "localhost:", 1)
	return [3]string{one.Addr(), spelled, two.Addr()}, [3]int{dbs[0], dbs[1], 0}, one, two
}

// newDatabaseLocker returns a Locker over new nodes of addrs and db,
// closed when t ends.
func newDatabaseLocker(t *testing.T, dial DatabaseDialer, addrs [3]string, db [3]int, opts ...core.Option) *core.Locker {
	nodes := make([]core.Node, len(addrs))
	for i := range addrs {
		nodes[i] = dial(t, addrs[i], db[i])
	}
	opts = append([]core.Option{core.WithStrategy(strategies.Sequential()), core.WithNodeTimeout(time.Second)}, opts...)
	l, err := core.New(nodes, opts...)
	require.NoError(t, err, "the names differ, so New cannot tell")
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

// dbClient returns an admin client of the server at addr with database db
// selected, closed when t ends.
func dbClient(t *testing.T, addr string, db int) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, DB: db, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// aloneNoQuorum: with the key taken on the second server, the first
// server's two databases both say yes, and only one of them may count.
func aloneNoQuorum(t *testing.T, dial DatabaseDialer, dbs [2]int) {
	addrs, db, one, two := twoDatabases(t, dbs)
	l := newDatabaseLocker(t, dial, addrs, db)
	ctx := t.Context()
	require.NoError(t, l.Adopt(ctx), "as a server up for long: every database votes at once")
	require.NoError(t, dbClient(t, two.Addr(), 0).Set(ctx, "k", "rival", time.Minute).Err())

	lock, err := l.TryAcquire(ctx, "k")
	if err == nil {
		_ = lock.Release(ctx)
		require.FailNow(t, "one server won a quorum of three alone, through two databases")
	}
	require.ErrorIs(t, err, core.ErrDuplicateNode)
	var qe *core.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, []core.Outcome{core.OutcomeOK, core.OutcomeFailed, core.OutcomeRefused},
		[]core.Outcome{qe.Nodes[0].Outcome, qe.Nodes[1].Outcome, qe.Nodes[2].Outcome})
	assert.ErrorContains(t, qe.Nodes[1].Err, "node "+strconv.Quote(qe.Nodes[1].Node)+" is the same server as node "+
		strconv.Quote(qe.Nodes[0].Node))
	assert.Zero(t, dbClient(t, one.Addr(), dbs[0]).Exists(ctx, "k").Val(), "the failed round released the voting database")
	// The duplicate's calls do not run once it is known: the key its first
	// yes set in its own database stays there until its TTL, where only
	// the duplicate can see it.
	assert.Positive(t, dbClient(t, one.Addr(), dbs[1]).PTTL(ctx, "k").Val())
}

// noSecondHolder is the double grant of issue 26: the first client holds
// the lock on the first server (one database) and the second; the first
// server then loses its keys (a flush, or a restart of a server up longer
// than the max TTL), and a second client must still be refused.
func noSecondHolder(t *testing.T, dial DatabaseDialer, dbs [2]int) {
	addrs, db, one, _ := twoDatabases(t, dbs)
	// The restart guard would keep the flushed databases from voting for
	// a while, only because this server started a moment ago.
	first := newDatabaseLocker(t, dial, addrs, db, core.WithRestartGuard(0))
	ctx := t.Context()
	held, err := first.TryAcquire(ctx, "k")
	require.NoError(t, err, "the first database and the second server")
	defer func() { _ = held.Release(ctx) }()

	require.NoError(t, dbClient(t, one.Addr(), 0).FlushAll(ctx).Err())
	second := newDatabaseLocker(t, dial, addrs, db, core.WithRestartGuard(0))
	lock, err := second.TryAcquire(ctx, "k")
	if err == nil {
		_ = lock.Release(ctx)
		require.FailNow(t, "two holders: the second client won on one server's two databases")
	}
	require.ErrorIs(t, err, core.ErrDuplicateNode)
}
