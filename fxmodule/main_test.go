package fxmodule_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	// Every driver, so that the tests dial with each.
	_ "github.com/quorumlock/quorumlock/fxmodule/redigo"
	_ "github.com/quorumlock/quorumlock/fxmodule/valkey"
)

// TestMain stops the servers the tests share (redistest.SharedServers
// and TestServers) and then checks that no goroutine outlived them.
func TestMain(m *testing.M) { redistest.Main(m) }

// servers returns the addresses of three servers that the tests share;
// each test uses keys of its own.
func servers(t *testing.T) []string {
	t.Helper()
	list := redistest.SharedServers(t, 3)
	addrs := make([]string, len(list))
	for i, s := range list {
		addrs[i] = s.Addr()
	}
	return addrs
}

// deadAddr returns a loopback address where nobody listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	port, err := redistest.FreePort()
	require.NoError(t, err)
	return "127.0.0.1:" + strconv.Itoa(port)
}

// plainClient returns a go-redis client of the test's own, closed at the
// end of the test.
func plainClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// holders returns the addresses whose server holds key.
func holders(t *testing.T, addrs []string, key string) []string {
	t.Helper()
	var out []string
	for _, a := range addrs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n, err := plainClient(t, a).Exists(ctx, key).Result()
		cancel()
		require.NoError(t, err, "EXISTS %s on %s", key, a)
		if n == 1 {
			out = append(out, a)
		}
	}
	return out
}

// testCtx is a context bounded for one test step.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
