package fxmodule_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	// Every driver, so that the tests dial with each.
	_ "github.com/quorumlock/quorumlock/fxmodule/redigo"
	_ "github.com/quorumlock/quorumlock/fxmodule/valkey"
)

// The tests share three redis-server processes, started by the first test
// that needs them; each test uses keys of its own.
var shared struct {
	once    sync.Once
	servers []*redistest.Server
	err     error
}

func TestMain(m *testing.M) {
	redistest.QuietRedisLogs()
	code := m.Run()
	for _, s := range shared.servers {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing redis-server:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := conformance.FindLeaks(conformance.LeakGrace); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// servers returns the addresses of the three shared servers.
func servers(t *testing.T) []string {
	t.Helper()
	redistest.RequireServer(t)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for range 3 {
			s, err := redistest.StartServer(ctx)
			if err != nil {
				shared.err = err
				return
			}
			shared.servers = append(shared.servers, s)
		}
	})
	require.NoError(t, shared.err, "starting the shared redis-servers")
	addrs := make([]string, len(shared.servers))
	for i, s := range shared.servers {
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
