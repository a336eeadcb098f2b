package safety_test

import (
	"bufio"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/conformance/safety"
)

// rawConn is a plain TCP connection through a proxy, speaking RESP
// inline commands.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// ping sends PING and returns the reply line, or the error of reading it
// within wait.
func (c *rawConn) ping(wait time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	return c.r.ReadString('\n')
}

func startProxy(t *testing.T) *safety.Proxy {
	redistest.RequireServer(t)
	s, err := redistest.StartServer(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	p, err := safety.StartProxy(s.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close(), "every link ended") })
	return p
}

// TestProxyPartition shows a partition hangs a node without closing
// anything, and that once healed a connection that lost bytes is cut
// rather than handed the reply of a later request, while an idle one
// goes on.
func TestProxyPartition(t *testing.T) {
	p := startProxy(t)
	lost, idle := dialRaw(t, p.Addr()), dialRaw(t, p.Addr())
	for _, c := range []*rawConn{lost, idle} {
		reply, err := c.ping(time.Second)
		require.NoError(t, err)
		require.Equal(t, "+PONG\r\n", reply)
	}

	require.NoError(t, p.Partition())
	_, err := lost.ping(200 * time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "no reply, no close: hung")
	fresh := dialRaw(t, p.Addr()) // accepted, then hung
	_, err = fresh.ping(200 * time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)

	require.NoError(t, p.Heal())
	reply, err := lost.ping(time.Second)
	assert.Error(t, err, "cut, not answered (reply %q)", reply)
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded)
	reply, err = idle.ping(time.Second)
	require.NoError(t, err, "an idle connection survives")
	assert.Equal(t, "+PONG\r\n", reply)
	reply, err = dialRaw(t, p.Addr()).ping(time.Second)
	require.NoError(t, err)
	assert.Equal(t, "+PONG\r\n", reply)
}

// TestProxyDownAndReset shows Down closes the open connections and
// refuses new ones until Up, on the same address, and Reset closes the
// open ones only.
func TestProxyDownAndReset(t *testing.T) {
	p := startProxy(t)
	c := dialRaw(t, p.Addr())
	_, err := c.ping(time.Second)
	require.NoError(t, err)

	require.NoError(t, p.Down())
	_, err = c.ping(time.Second)
	require.Error(t, err, "closed")
	_, err = net.DialTimeout("tcp", p.Addr(), time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.NoError(t, p.Up())
	c = dialRaw(t, p.Addr())
	_, err = c.ping(time.Second)
	require.NoError(t, err)

	require.NoError(t, p.Reset())
	_, err = c.ping(time.Second)
	require.Error(t, err, "closed by Reset")
	_, err = dialRaw(t, p.Addr()).ping(time.Second)
	require.NoError(t, err, "the next connection works")
}

// TestProxyLatency shows SetLatency delays each round trip by at least
// the delay, and SetLatency(0, 0) removes it.
func TestProxyLatency(t *testing.T) {
	p := startProxy(t)
	c := dialRaw(t, p.Addr())
	require.NoError(t, p.SetLatency(150*time.Millisecond, 0))
	start := time.Now()
	_, err := c.ping(5 * time.Second)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	require.NoError(t, p.SetBandwidth(1))
	require.NoError(t, p.Heal(), "removes latency and bandwidth")
	_, err = c.ping(5 * time.Second)
	require.NoError(t, err)
}

// TestProxyHealUnderLoad heals a partition while every client keeps
// sending, the case where removing toxiproxy's timeout toxic leaves a
// goroutine per connection blocked for ever: Close finds every link
// ended, and TestMain's goleak check finds no goroutine left.
func TestProxyHealUnderLoad(t *testing.T) {
	p := startProxy(t)
	var wg sync.WaitGroup
	for range 10 {
		c := dialRaw(t, p.Addr())
		_, err := c.ping(time.Second)
		require.NoError(t, err)
		wg.Go(func() {
			for {
				if _, err := c.Write([]byte("PING\r\n")); err != nil {
					return
				}
			}
		})
	}
	for range 3 {
		require.NoError(t, p.Partition())
		time.Sleep(20 * time.Millisecond) // traffic dropped meanwhile
		require.NoError(t, p.Heal())
	}
	require.NoError(t, p.Close(), "every link ended")
	wg.Wait() // the writes fail once the proxy closed the connections
}
