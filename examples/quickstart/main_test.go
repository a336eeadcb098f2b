package main

import (
	"fmt"
	"os"
	"strings"
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
// close its Locker, its clients and its embedded servers.
func TestMain(m *testing.M) {
	redis.SetLogger(demo.Quiet{})
	goleak.VerifyTestMain(m)
}

// runQuickstart runs the program as main does, bounded as main bounds it.
func runQuickstart(t *testing.T, addrs []string) (string, error) {
	t.Helper()
	return demotest.Run(t, run, 20*time.Second, addrs, "the quickstart should take a second or two")
}

// The README shows the quickstart as a newcomer runs it, from the top of a
// checkout, where the workspace brings this module in (make examples runs
// that very command).
func TestReadmeShowsQuickstart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	assert.Contains(t, string(readme), "go run ./examples/quickstart")
	work, err := os.ReadFile("../../go.work")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^\s*\./examples$`, string(work), "the workspace uses the examples module")
}

// The README's first command must work on a machine with nothing set up.
func TestQuickstartEmbedded(t *testing.T) {
	out, err := runQuickstart(t, nil)
	require.NoError(t, err, out)
	for _, want := range []string{
		"5 embedded miniredis servers, TTL 10s, quorum 3 of 5",
		`4 workers contend for "quickstart:orders:42"`,
		"8 acquisitions, never two holders at once",
		"2 of 5 nodes down (stopped ",
		`acquired "quickstart:orders:42" on the 3 nodes still up`,
		"3 of 5 nodes down (stopped ",
		"errors.Is(err, core.ErrUnavailable) == true",
		"connection refused",
		"quickstart: all checks passed",
	} {
		assert.Contains(t, out, want)
	}
	assert.Equal(t, 8, strings.Count(out, "holds the lock, validity 9."), out)
	assert.Equal(t, 3, strings.Count(out, " failed: "), "one line per node down:\n%s", out)
	assert.Equal(t, 2, strings.Count(out, " ok\n"), "one line per node up:\n%s", out)
	assert.LessOrEqual(t, strings.Count(out, "\n"), 25, "the output should stay short:\n%s", out)
}

// With REDIS_ADDRS the scenario adapts to the number of servers: N - quorum
// down, then one more. Here the servers are miniredis too, but reached as
// REDIS_ADDRS would reach them, so nodes go "down" by closing the program's
// own connections.
func TestQuickstartAddrs(t *testing.T) {
	for _, tc := range []struct {
		n, quorum, spare int
	}{
		{1, 1, 0},
		{2, 2, 0},
		{3, 2, 1},
		{4, 3, 1},
		{5, 3, 2},
	} {
		t.Run(fmt.Sprintf("%d servers", tc.n), func(t *testing.T) {
			addrs := demotest.Miniredis(t, tc.n)
			out, err := runQuickstart(t, addrs)
			require.NoError(t, err, out)
			assert.Contains(t, out, fmt.Sprintf("from REDIS_ADDRS (%s), TTL 10s, quorum %d of %d", strings.Join(addrs, ", "), tc.quorum, tc.n))
			assert.Contains(t, out, fmt.Sprintf("%d of %d nodes down (closed our connection", tc.spare+1, tc.n))
			assert.Contains(t, out, "keeps running")
			assert.Contains(t, out, "redis: client is closed")
			assert.Contains(t, out, "quickstart: all checks passed")
		})
	}
}

// A wrong address fails at once with a plain message, not with a lock error
// after many retries.
func TestQuickstartUnreachable(t *testing.T) {
	dead := demotest.DeadAddr(t)
	out, err := runQuickstart(t, []string{demotest.Miniredis(t, 1)[0], dead})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no answer to PING from the Redis server at "+dead)
	assert.NotContains(t, out, "all checks passed")
}

// The same program on real redis-server processes, as a user with
// REDIS_ADDRS runs it. Skipped when redis-server is missing (outside CI).
func TestQuickstartRealServers(t *testing.T) {
	out, err := runQuickstart(t, demotest.RealServers(t, 5))
	require.NoError(t, err, out)
	assert.Contains(t, out, "5 Redis servers from REDIS_ADDRS")
	assert.Contains(t, out, "2 of 5 nodes down (closed our connections to")
	assert.Contains(t, out, "redis: client is closed")
	assert.Contains(t, out, "quickstart: all checks passed")
}
