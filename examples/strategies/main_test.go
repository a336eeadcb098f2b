package main

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/examples/internal/demotest"
)

// TestMain fails the package if any test leaves a goroutine behind: run must
// close its Lockers, its clients, the proxy and its embedded servers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runStrategies runs the program as main does, bounded as main bounds it.
func runStrategies(t *testing.T, addrs []string) (string, error) {
	t.Helper()
	return demotest.Run(t, run, 30*time.Second, addrs, "the example should take a few seconds")
}

func checkOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		"greedy (the default: every node is asked, every answer awaited):\n  sequential ",
		"\n  parallel ",
		"\n  failfast ",
		"WithStopAtQuorum(true) (a round ends at the third vote):\n  sequential+WithStopAtQuorum ",
		"\n  parallel+WithStopAtQuorum ",
		"\n  failfast+WithStopAtQuorum ",
		"strategies: all checks passed",
	} {
		assert.Contains(t, out, want)
	}
}

// The default: five embedded servers, node 0 behind the slow proxy.
func TestStrategiesEmbedded(t *testing.T) {
	out, err := runStrategies(t, nil)
	require.NoError(t, err, out)
	assert.Contains(t, out, "5 embedded miniredis servers, quorum 3;\nnode 0 (")
	assert.Contains(t, out, "delays every request by 30ms")
	assert.Contains(t, out, "sequential\n  asks node 0 first")
	checkOutput(t, out)
}

// REDIS_ADDRS: nothing is slowed, and the program says so.
func TestStrategiesAddrs(t *testing.T) {
	out, err := runStrategies(t, demotest.Miniredis(t, 3))
	require.NoError(t, err, out)
	assert.Contains(t, out, "3 Redis servers from REDIS_ADDRS")
	assert.Contains(t, out, "quorum 2; no node is slowed")
	checkOutput(t, out)
}

// The proxy delays what the client sends, passes replies through, and
// leaves no goroutine behind when closed with a connection still open.
func TestSlowProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := echo.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	p, err := newSlowProxy(echo.Addr().String(), 20*time.Millisecond)
	require.NoError(t, err)

	c, err := net.Dial("tcp", p.addr())
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = c.Write([]byte("ping"))
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(buf))
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)

	p.close()
	require.NoError(t, echo.Close())
	<-done
}

// The same program on real redis-server processes, as a user with
// REDIS_ADDRS runs it. Skipped when redis-server is missing (outside CI).
func TestStrategiesRealServers(t *testing.T) {
	out, err := runStrategies(t, demotest.RealServers(t, 5))
	require.NoError(t, err, out)
	assert.Contains(t, out, "5 Redis servers from REDIS_ADDRS")
	checkOutput(t, out)
}
