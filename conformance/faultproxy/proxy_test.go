package faultproxy_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/conformance/faultproxy"
	"github.com/quorumlock/quorumlock/conformance/redistest"
)

// TestMain fails the run when any goroutine outlives the tests: the
// proxy's own (Close waits for them) and the go-redis clients' (closed by
// each test). No goroutine needs to be ignored.
func TestMain(m *testing.M) {
	redistest.QuietRedisLogs()
	goleak.VerifyTestMain(m)
}

// newProxy starts a redis-server of the test's own and a proxy in front of
// it, both closed when the test ends (the proxy first).
func newProxy(t *testing.T) (*faultproxy.Proxy, *redistest.Server) {
	t.Helper()
	redistest.RequireServer(t)
	srv, err := redistest.StartServer(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	p, err := faultproxy.Start(srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return p, srv
}

// newClient is a go-redis client of addr that honours context deadlines
// and does not retry, closed when the test ends.
func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ping sends PING on a fresh go-redis connection with the given deadline.
func ping(t *testing.T, addr string, timeout time.Duration) error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.Ping(ctx).Err()
}

// eventually calls f until it returns nil, failing the test if it still
// fails after within.
func eventually(t *testing.T, within time.Duration, f func() error) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", within, err)
		}
		<-tick.C
	}
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// rawConn speaks inline Redis commands over a plain TCP connection, so a
// test sees exactly what happens to one connection.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// do sends an inline command and returns the first line of the reply.
func (c *rawConn) do(cmd string, timeout time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	return strings.TrimSpace(line), err
}

// timedPing measures one PING round trip on c.
func (c *rawConn) timedPing(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	reply, err := c.do("PING", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "+PONG", reply)
	return time.Since(start)
}

func TestForwarding(t *testing.T) {
	t.Parallel()
	p, srv := newProxy(t)
	assert.Equal(t, srv.Addr(), p.Upstream())
	assert.NotEqual(t, srv.Addr(), p.Addr())
	assert.True(t, strings.HasPrefix(p.Addr(), "127.0.0.1:"), p.Addr())
	assert.False(t, p.Faulty())

	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 4})
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	got, err := c.Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got)

	// The server really has it.
	direct := newClient(t, srv.Addr())
	got, err = direct.Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got)

	// Values larger than one read, from several connections at once.
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			key := "big" + string(rune('a'+i))
			if !assert.NoError(t, c.Set(ctx, key, big, 0).Err()) {
				return
			}
			got, err := c.Get(ctx, key).Result()
			assert.NoError(t, err)
			assert.True(t, got == big, "value of %s changed in transit", key)
		})
	}
	wg.Wait()

	// A FIN passes both ways: QUIT is answered, then the server's close
	// reaches the client.
	raw := dial(t, p.Addr())
	reply, err := raw.do("QUIT", 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "+OK", reply)
	_, err = raw.r.ReadByte()
	assert.ErrorIs(t, err, io.EOF)
}

func TestLatency(t *testing.T) {
	t.Parallel()
	p, _ := newProxy(t)
	raw := dial(t, p.Addr())
	raw.timedPing(t) // connected before the fault, it gets it too

	rdb := newClient(t, p.Addr())
	require.NoError(t, rdb.Ping(t.Context()).Err()) // its connection is open

	require.NoError(t, p.SetLatency(80*time.Millisecond, 0))
	assert.True(t, p.Faulty())
	for range 3 {
		assert.GreaterOrEqual(t, raw.timedPing(t), 70*time.Millisecond)
	}

	// A deadline shorter than the latency expires, on an open connection
	// and on a new one.
	expires := func(ping func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := ping(ctx)
		if err == nil && time.Since(start) >= 70*time.Millisecond {
			// The reply came as late as it should, yet the call
			// succeeded: the deadline's timer had not fired yet when the
			// client read (seen once under -race -count=20 on a loaded
			// 2-core machine). The delay is what the proxy owes.
			t.Logf("deadline timer fired late: PING answered after %v", time.Since(start))
			return
		}
		require.Error(t, err)
		assert.True(t, isTimeout(err), "want a timeout, got %v", err)
	}
	expires(func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	expires(func(ctx context.Context) error {
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 1})
		defer c.Close()
		return c.Ping(ctx).Err()
	})

	require.Error(t, p.SetLatency(-time.Millisecond, 0))
	require.Error(t, p.SetLatency(time.Millisecond, -time.Millisecond))

	require.NoError(t, p.SetLatency(0, 0))
	assert.False(t, p.Faulty())
	eventually(t, 5*time.Second, func() error { return ping(t, p.Addr(), 30*time.Millisecond) })
	eventually(t, 5*time.Second, func() error {
		if d := raw.timedPing(t); d > 30*time.Millisecond {
			return errors.New("PING took " + d.String())
		}
		return nil
	})
}

// TestLatencyHeldReplies: replies already waiting for their delay are sent
// at once when the latency is removed.
func TestLatencyHeldReplies(t *testing.T) {
	t.Parallel()
	p, _ := newProxy(t)
	raw := dial(t, p.Addr())
	raw.timedPing(t)
	require.NoError(t, p.SetLatency(time.Hour, 0))

	_, err := raw.do("PING", 50*time.Millisecond)
	require.True(t, isTimeout(err), "want a timeout, got %v", err)
	require.NoError(t, p.Heal())
	require.NoError(t, raw.SetDeadline(time.Now().Add(5*time.Second)))
	line, err := raw.r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "+PONG", strings.TrimSpace(line))
	raw.timedPing(t)
}

func TestJitter(t *testing.T) {
	t.Parallel()
	p, _ := newProxy(t)
	raw := dial(t, p.Addr())
	raw.timedPing(t)
	require.NoError(t, p.SetLatency(50*time.Millisecond, 40*time.Millisecond))
	assert.True(t, p.Faulty())

	// Eight draws from [10ms, 90ms] all within 10 ms of each other has a
	// chance of a few in a million.
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 8 {
		d := raw.timedPing(t)
		lo, hi = min(lo, d), max(hi, d)
	}
	assert.GreaterOrEqual(t, lo, 5*time.Millisecond)
	assert.Greater(t, hi-lo, 10*time.Millisecond, "round trips from %v to %v", lo, hi)

	// Jitter alone is a fault too.
	require.NoError(t, p.SetLatency(0, 5*time.Millisecond))
	assert.True(t, p.Faulty())
	require.NoError(t, p.Heal())
	assert.False(t, p.Faulty())
}

func TestPartition(t *testing.T) {
	t.Parallel()
	p, srv := newProxy(t)
	ctx := t.Context()
	rdb := newClient(t, p.Addr())
	require.NoError(t, rdb.Ping(ctx).Err())
	idle := dial(t, p.Addr())
	idle.timedPing(t)
	busy := dial(t, p.Addr())
	busy.timedPing(t)

	require.NoError(t, p.Partition())
	require.NoError(t, p.Partition()) // idempotent
	assert.True(t, p.Faulty())

	// An open connection times out instead of failing at once.
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err := rdb.Ping(pctx).Err()
	require.Error(t, err)
	assert.True(t, isTimeout(err), "want a timeout, got %v", err)
	assert.GreaterOrEqual(t, time.Since(start), 90*time.Millisecond)

	// So does a new one: it connects, and then hears nothing.
	start = time.Now()
	err = ping(t, p.Addr(), 100*time.Millisecond)
	require.Error(t, err)
	assert.True(t, isTimeout(err), "want a timeout, got %v", err)
	assert.GreaterOrEqual(t, time.Since(start), 90*time.Millisecond)

	// A write during the partition is dropped, not held: it never runs.
	_, err = busy.do("SET dropped 1", 100*time.Millisecond)
	assert.True(t, isTimeout(err), "want a timeout, got %v", err)

	require.NoError(t, p.Heal())
	assert.False(t, p.Faulty())
	eventually(t, 5*time.Second, func() error { return ping(t, p.Addr(), 100*time.Millisecond) })

	// The connection that lost bytes is reset; the idle one carries on.
	_, err = busy.do("PING", 5*time.Second)
	assert.ErrorIs(t, err, syscall.ECONNRESET)
	idle.timedPing(t)
	n, err := newClient(t, srv.Addr()).Exists(ctx, "dropped").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a command sent during the partition reached the server")
}

// TestPartitionKeepsLatency: faults combine, and Heal removes them all.
func TestPartitionKeepsLatency(t *testing.T) {
	t.Parallel()
	p, _ := newProxy(t)
	raw := dial(t, p.Addr())
	require.NoError(t, p.SetLatency(60*time.Millisecond, 0))
	require.NoError(t, p.Partition())
	_, err := raw.do("PING", 100*time.Millisecond)
	assert.True(t, isTimeout(err), "want a timeout, got %v", err)
	require.NoError(t, p.Heal())
	assert.False(t, p.Faulty())
	fresh := dial(t, p.Addr())
	eventually(t, 5*time.Second, func() error {
		if d := fresh.timedPing(t); d > 40*time.Millisecond {
			return errors.New("PING took " + d.String())
		}
		return nil
	})
}

func TestReset(t *testing.T) {
	t.Parallel()
	p, srv := newProxy(t)
	ctx := t.Context()
	control := newClient(t, srv.Addr())
	conns := []*rawConn{dial(t, p.Addr()), dial(t, p.Addr())}
	for _, c := range conns {
		c.timedPing(t)
	}
	clients := func() int {
		list, err := control.ClientList(ctx).Result()
		require.NoError(t, err)
		return strings.Count(list, "\n")
	}
	require.Equal(t, 3, clients())

	require.NoError(t, p.Reset())
	assert.False(t, p.Faulty(), "a reset is an event, not a fault")
	for _, c := range conns {
		_, err := c.do("PING", 5*time.Second)
		assert.ErrorIs(t, err, syscall.ECONNRESET)
	}
	// The server side was closed too.
	eventually(t, 5*time.Second, func() error {
		if n := clients(); n != 1 {
			return errors.New("server still has connections from the proxy")
		}
		return nil
	})

	dial(t, p.Addr()).timedPing(t)
	require.NoError(t, ping(t, p.Addr(), 5*time.Second))
}

func TestRefuse(t *testing.T) {
	t.Parallel()
	p, _ := newProxy(t)
	addr := p.Addr()
	old := dial(t, addr)
	old.timedPing(t)

	require.NoError(t, p.Refuse())
	require.NoError(t, p.Refuse()) // idempotent
	assert.True(t, p.Faulty())
	assert.Equal(t, addr, p.Addr())

	// Existing connections are cut.
	_, err := old.do("PING", 5*time.Second)
	assert.ErrorIs(t, err, syscall.ECONNRESET)

	// New ones are refused at once. (Raw dials: a go-redis pool whose
	// dials fail starts a probe that outlives its Close by up to a second,
	// which goleak would report.)
	start := time.Now()
	_, err = net.DialTimeout("tcp", addr, 5*time.Second)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Less(t, time.Since(start), time.Second)

	require.NoError(t, p.Heal())
	assert.False(t, p.Faulty())
	assert.Equal(t, addr, p.Addr())
	eventually(t, 5*time.Second, func() error { return ping(t, addr, time.Second) })
	dial(t, addr).timedPing(t)

	// Refuse and Heal again on the same address.
	require.NoError(t, p.Refuse())
	_, err = net.DialTimeout("tcp", addr, 5*time.Second)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.NoError(t, p.Heal())
	dial(t, addr).timedPing(t)
}

// TestUpstreamDown: a proxy may start before its server; a connection
// made while nothing answers upstream is reset.
func TestUpstreamDown(t *testing.T) {
	t.Parallel()
	// A refusing proxy is an address that nobody else gets meanwhile.
	dead, err := faultproxy.Start("127.0.0.1:1")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, dead.Close()) })
	require.NoError(t, dead.Refuse())

	p, err := faultproxy.Start(dead.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	// The reset can come before the dial returns, or at the first command.
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
		_, err = (&rawConn{Conn: c, r: bufio.NewReader(c)}).do("PING", 5*time.Second)
	}
	assert.Error(t, err)
	assert.False(t, isTimeout(err), "want a reset, got %v", err)
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	for _, upstream := range []string{"", "localhost", "127.0.0.1", ":6379", "127.0.0.1:", "127.0.0.1:redis", "127.0.0.1:0", "127.0.0.1:70000", "[::1"} {
		p, err := faultproxy.Start(upstream)
		assert.Error(t, err, "upstream %q", upstream)
		assert.Nil(t, p)
	}
}

// TestConcurrentFaults changes faults while clients keep talking, for the
// race detector; afterwards the proxy works as new. The clients are raw
// connections: their dials fail while the proxy refuses (see TestRefuse).
func TestConcurrentFaults(t *testing.T) {
	t.Parallel()
	p, _ := newProxy(t)
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		attempts atomic.Int64
	)
	stopClients := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer stopClients() // also when the test fails
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				attempts.Add(1)
				c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
				if err != nil {
					continue
				}
				rc := &rawConn{Conn: c, r: bufio.NewReader(c)}
				for range 5 {
					attempts.Add(1)
					if _, err := rc.do("SET k v", 20*time.Millisecond); err != nil {
						break
					}
				}
				_ = c.Close()
			}
		})
	}
	faults := []func() error{
		func() error { return p.SetLatency(5*time.Millisecond, 3*time.Millisecond) },
		p.Partition, p.Reset, p.Refuse, p.Heal,
		func() error { _ = p.Faulty(); return nil },
	}
	// Change faults until the clients have tried often enough in between.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 300 || (attempts.Load() < 1000 && time.Now().Before(deadline)); i++ {
		require.NoError(t, faults[(i*7)%len(faults)](), "change %d", i)
		runtime.Gosched()
	}
	stopClients()
	require.NoError(t, p.Heal())
	assert.False(t, p.Faulty())
	eventually(t, 5*time.Second, func() error { return ping(t, p.Addr(), time.Second) })
}

// TestClose runs alone (not in parallel), so that it can check that no
// goroutine of any proxy is left once Close returns.
func TestClose(t *testing.T) {
	p, _ := newProxy(t)
	held := dial(t, p.Addr())
	held.timedPing(t)
	idle := dial(t, p.Addr())
	idle.timedPing(t)
	lost := dial(t, p.Addr())
	lost.timedPing(t)

	// Leave work in every state: a reply held by latency, bytes lost to a
	// partition, an idle connection.
	require.NoError(t, p.SetLatency(time.Hour, 0))
	_, err := held.do("PING", 20*time.Millisecond)
	require.True(t, isTimeout(err))
	require.NoError(t, p.Partition())
	_, err = lost.do("PING", 20*time.Millisecond)
	require.True(t, isTimeout(err))

	start := time.Now()
	require.NoError(t, p.Close())
	assert.Less(t, time.Since(start), time.Second, "Close waited for held replies")
	require.NoError(t, p.Close(), "Close is idempotent")

	// Every connection is closed and the port released.
	for _, c := range []*rawConn{held, idle, lost} {
		_, err := c.do("PING", 5*time.Second)
		assert.Error(t, err)
		assert.False(t, isTimeout(err), "a closed proxy kept a connection open: %v", err)
	}
	_, err = net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)

	// No goroutine of the proxy is left. A goroutine that has just marked
	// itself done may still be returning: allow it a moment.
	eventually(t, time.Second, func() error {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		for g := range strings.SplitSeq(stacks, "\n\n") {
			if strings.Contains(g, "conformance/faultproxy.(") {
				return errors.New("goroutine left after Close:\n" + g)
			}
		}
		return nil
	})

	// Every method after Close returns an error or its value, never panics.
	assert.ErrorIs(t, p.SetLatency(time.Millisecond, 0), faultproxy.ErrClosed)
	assert.ErrorIs(t, p.Partition(), faultproxy.ErrClosed)
	assert.ErrorIs(t, p.Reset(), faultproxy.ErrClosed)
	assert.ErrorIs(t, p.Refuse(), faultproxy.ErrClosed)
	assert.ErrorIs(t, p.Heal(), faultproxy.ErrClosed)
	assert.NotEmpty(t, p.Addr())
	assert.NotEmpty(t, p.Upstream())
	_ = p.Faulty()
}
