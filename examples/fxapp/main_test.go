package main

import (
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
	"github.com/quorumlock/quorumlock/fxmodule"
)

// TestMain fails the package if any test leaves a goroutine behind: stopping
// the app must close the Locker and the clients the module built, and run
// must close its embedded servers.
func TestMain(m *testing.M) {
	redis.SetLogger(demo.Quiet{}) // a refused dial is the point of TestFxAppUnreachable
	goleak.VerifyTestMain(m)
}

// clearEnv empties (for the test) every QUORUMLOCK_ variable of the
// environment: the program reads them all, and a test sets its own.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, fxmodule.DefaultEnvPrefix+"_") {
			t.Setenv(name, "")
		}
	}
}

// runApp runs the program as main does, bounded as main bounds it.
func runApp(t *testing.T, addrs []string) (string, error) {
	t.Helper()
	return demotest.Run(t, run, 30*time.Second, addrs, "the example should take a second or two")
}

func checkOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		`level=DEBUG msg="quorumlock acquire" key=fxapp:migrations lock=mutex outcome=ok `,
		`level=DEBUG msg="quorumlock acquire" key=fxapp:migrations lock=mutex outcome=contended `,
		`job: holding "fxapp:migrations" (quorum 2 of the nodes); a second TryAcquire is refused: core.ErrNotAcquired`,
		`level=DEBUG msg="quorumlock release" key=fxapp:migrations lock=mutex outcome=ok `,
		"the module's OnStop hook closed the Locker",
		"refused: errors.Is(err, core.ErrClosed) == true",
		"fxapp: all checks passed",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "time=")
	assert.NotContains(t, out, "nodes.")
}

// The default: no variable set, three embedded servers, rueidis.
func TestFxAppEmbedded(t *testing.T) {
	clearEnv(t)
	out, err := runApp(t, nil)
	require.NoError(t, err, out)
	assert.Contains(t, out, "servers from 3 embedded miniredis servers (QUORUMLOCK_ADDRS and REDIS_ADDRS are unset)")
	assert.Contains(t, out, "driver rueidis (the default), 3 nodes: ")
	checkOutput(t, out)
}

// QUORUMLOCK_DRIVER and QUORUMLOCK_ADDRS choose the driver and servers.
func TestFxAppEnv(t *testing.T) {
	for _, driver := range []string{"goredis", "redigo", "rueidis"} {
		t.Run(driver, func(t *testing.T) {
			clearEnv(t)
			addrs := demotest.Miniredis(t, 3)
			t.Setenv("QUORUMLOCK_DRIVER", driver)
			t.Setenv("QUORUMLOCK_ADDRS", strings.Join(addrs, ","))
			t.Setenv("QUORUMLOCK_TTL", "5s")
			out, err := runApp(t, []string{"127.0.0.1:1"}) // REDIS_ADDRS, overridden
			require.NoError(t, err, out)
			assert.Contains(t, out, "servers from QUORUMLOCK_ADDRS\n  driver "+driver+", 3 nodes: "+strings.Join(addrs, ", "))
			assert.Contains(t, out, "validity=4.")
			checkOutput(t, out)
		})
	}
}

// Without QUORUMLOCK_ADDRS, REDIS_ADDRS gives the servers.
func TestFxAppRedisAddrs(t *testing.T) {
	clearEnv(t)
	out, err := runApp(t, demotest.Miniredis(t, 3))
	require.NoError(t, err, out)
	assert.Contains(t, out, "servers from REDIS_ADDRS (QUORUMLOCK_ADDRS is unset)")
	checkOutput(t, out)
}

// A bad variable stops the program before any app is built, naming it.
func TestFxAppBadEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("QUORUMLOCK_TTL", "ten seconds")
	out, err := runApp(t, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "QUORUMLOCK_TTL")
	assert.Empty(t, out)
}

// A server that is down fails app.Start with the module's error.
func TestFxAppUnreachable(t *testing.T) {
	clearEnv(t)
	dead := demotest.DeadAddr(t)
	t.Setenv("QUORUMLOCK_DRIVER", "goredis")
	// Two of three: no quorum (one down is tolerated by default).
	t.Setenv("QUORUMLOCK_ADDRS", strings.Join([]string{demotest.Miniredis(t, 1)[0], dead, demotest.DeadAddr(t)}, ","))
	out, err := runApp(t, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "starting the app")
	assert.Contains(t, err.Error(), dead)
	assert.NotContains(t, out, "all checks passed")
}

// The same program on real redis-server processes. Skipped when
// redis-server is missing (outside CI).
func TestFxAppRealServers(t *testing.T) {
	addrs := demotest.RealServers(t, 3)
	clearEnv(t)
	t.Setenv("QUORUMLOCK_ADDRS", strings.Join(addrs, ","))
	out, err := runApp(t, nil)
	require.NoError(t, err, out)
	checkOutput(t, out)
}
