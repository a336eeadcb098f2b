package main

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/examples/internal/demo"
	"github.com/quorumlock/quorumlock/examples/internal/demotest"
)

// TestMain fails the package if any test leaves a goroutine behind: run must
// shut its HTTP server down, close its client's connections, its Locker,
// its Redis clients and its embedded servers.
func TestMain(m *testing.M) {
	redis.SetLogger(demo.Quiet{})
	goleak.VerifyTestMain(m)
}

// runService runs the program as main does, bounded as main bounds it.
func runService(t *testing.T, addrs []string) (string, error) {
	t.Helper()
	return demotest.Run(t, run, 20*time.Second, addrs, "the example should take a second or two")
}

var noWaitLine = regexp.MustCompile(`(\d+) x 200 OK, (\d+) x 423 Locked \(Retry-After: 2\); the 19 answered within \d+ms\n`)

// checkOutput checks the lines every successful run prints.
func checkOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		"20 concurrent withdrawals of 10 from an account holding 1000",
		"POST /unlocked/accounts/carol/withdraw (no lock):\n  20 x 200 OK in ",
		"POST /accounts/alice/withdraw (httplock.WithWait(5s)",
		"; at most 1 handler at once; final balance 800\n  exact: 1000 - 20 x 10, served one at a time\n",
		"POST /accounts/bob/withdraw-now (httplock.WithWait(0)",
		"1 request first, holding the lock 300ms; 19 more at once while it does\n",
		"httpservice: all checks passed",
	} {
		assert.Contains(t, out, want)
	}
	m := noWaitLine.FindStringSubmatch(out)
	require.NotNil(t, m, "the WithWait(0) line:\n%s", out)
	served := atoi(t, m[1])
	assert.Equal(t, 20, served+atoi(t, m[2]))
	assert.Contains(t, out, "final balance "+strconv.Itoa(1000-10*served)+"\n  exact: 1000 - "+m[1]+" served x 10\n")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// The default: three embedded miniredis servers.
func TestHTTPServiceEmbedded(t *testing.T) {
	out, err := runService(t, nil)
	require.NoError(t, err, out)
	assert.Contains(t, out, "3 embedded miniredis servers, quorum 2 of 3; serving on http://127.0.0.1:")
	checkOutput(t, out)
}

// REDIS_ADDRS with a single server: a quorum of one.
func TestHTTPServiceAddrs(t *testing.T) {
	addr := demotest.Miniredis(t, 1)[0]
	out, err := runService(t, []string{addr})
	require.NoError(t, err, out)
	assert.Contains(t, out, "1 Redis server from REDIS_ADDRS ("+addr+"), quorum 1 of 1")
	checkOutput(t, out)
}

// A wrong address fails at once with a plain message.
func TestHTTPServiceUnreachable(t *testing.T) {
	dead := demotest.DeadAddr(t)
	out, err := runService(t, []string{dead})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no answer to PING from the Redis server at "+dead)
	assert.Empty(t, out)
}

// The same program on real redis-server processes, as a user with
// REDIS_ADDRS runs it. Skipped when redis-server is missing (outside CI).
func TestHTTPServiceRealServers(t *testing.T) {
	out, err := runService(t, demotest.RealServers(t, 3))
	require.NoError(t, err, out)
	assert.Contains(t, out, "3 Redis servers from REDIS_ADDRS")
	checkOutput(t, out)
}
