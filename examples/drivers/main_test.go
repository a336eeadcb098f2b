package main

import (
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/core"
	qldriver "github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/examples/internal/demotest"
)

// TestMain fails the package if any test leaves a goroutine behind: run must
// close its Lockers, every driver's clients and its embedded servers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runDrivers runs the program as main does, bounded as main bounds it.
func runDrivers(t *testing.T, addrs []string) (string, error) {
	t.Helper()
	return demotest.Run(t, run, 20*time.Second, addrs, "the example should take a second or two")
}

// checkOutput checks the lines every successful run prints.
func checkOutput(t *testing.T, out string) {
	t.Helper()
	assert.Equal(t, 4, strings.Count(out, "), released\n"), "each driver acquires and releases:\n%s", out)
	for _, want := range []string{
		"held through goredis  redigo, rueidis and valkey refused (ErrNotAcquired); released, then taken through redigo",
		"held through redigo   goredis, rueidis and valkey refused (ErrNotAcquired); released, then taken through rueidis",
		"held through rueidis  goredis, redigo and valkey refused (ErrNotAcquired); released, then taken through valkey",
		"held through valkey   goredis, redigo and rueidis refused (ErrNotAcquired); released, then taken through goredis",
		"drivers: all checks passed",
	} {
		assert.Contains(t, out, want)
	}
}

// The default: three embedded miniredis servers, rueidis and valkey-go
// included.
func TestDriversEmbedded(t *testing.T) {
	out, err := runDrivers(t, nil)
	require.NoError(t, err, out)
	assert.Contains(t, out, `3 embedded miniredis servers, one Locker per driver, key "drivers:invoice:7"`)
	checkOutput(t, out)
}

// REDIS_ADDRS with one server: a quorum of 1 still shows the interplay.
func TestDriversAddrs(t *testing.T) {
	addr := demotest.Miniredis(t, 1)[0]
	out, err := runDrivers(t, []string{addr})
	require.NoError(t, err, out)
	assert.Contains(t, out, "1 Redis server from REDIS_ADDRS ("+addr+")")
	checkOutput(t, out)
}

// A lock left on the servers by someone else is reported, not stolen. The
// servers are adopted for the restart guard, as demotest.Miniredis adopts
// them: a young server would refuse to vote, and the run fail with
// core.ErrUnavailable whoever held the key.
func TestDriversKeyHeldElsewhere(t *testing.T) {
	var addrs []string
	for range 3 {
		m := miniredis.RunT(t)
		require.NoError(t, m.Set(qldriver.BirthKey, "0"))
		require.NoError(t, m.Set(key, "someone else"))
		addrs = append(addrs, m.Addr())
	}
	out, err := runDrivers(t, addrs)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	assert.NotContains(t, out, "all checks passed")
}

// The same program on real redis-server processes, as a user with
// REDIS_ADDRS runs it. Skipped when redis-server is missing (outside CI).
func TestDriversRealServers(t *testing.T) {
	out, err := runDrivers(t, demotest.RealServers(t, 3))
	require.NoError(t, err, out)
	assert.Contains(t, out, "3 Redis servers from REDIS_ADDRS")
	checkOutput(t, out)
}
