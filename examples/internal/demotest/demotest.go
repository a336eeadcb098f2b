// Package demotest holds what the tests of the example programs of
// examples/ share: running a program's run function as its main does
// (Run), and the servers to run it on (Miniredis, RealServers, DeadAddr).
package demotest

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core/driver"
)

// MaxRun is how long a run of an example may take before Run fails the
// test: every example takes a few seconds at most.
const MaxRun = 10 * time.Second

// Run runs program (an example's run function) on addrs as main does,
// bounded by timeout as main bounds it, and returns what it printed and
// its error. It fails t, without stopping it, when the run took MaxRun or
// more; takes says what it should take, for the message ("the example
// should take a second or two").
func Run(t *testing.T, program func(context.Context, io.Writer, []string) error, timeout time.Duration, addrs []string, takes string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	err := program(ctx, &out, addrs)
	assert.Less(t, time.Since(start), MaxRun, takes)
	return out.String(), err
}

// Miniredis starts n miniredis servers, closed when the test ends, and
// returns their addresses: servers given as REDIS_ADDRS would give them,
// adopted for the restart guard (driver.BirthKey set to 0) as an operator
// adopts the servers of a new deployment.
func Miniredis(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		m := miniredis.RunT(t)
		require.NoError(t, m.Set(driver.BirthKey, "0"))
		addrs = append(addrs, m.Addr())
	}
	return addrs
}

// RealServers starts n redis-server processes, closed when the test ends,
// and returns their addresses. It skips t when redis-server is missing
// (and fails it under CI=true): see redistest.RequireServer.
func RealServers(t *testing.T, n int) []string {
	t.Helper()
	redistest.RequireServer(t)
	var addrs []string
	for range n {
		s, err := redistest.StartServer(t.Context())
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		addrs = append(addrs, s.Addr())
	}
	return addrs
}

// DeadAddr returns the address of a miniredis server already closed:
// nothing answers there.
func DeadAddr(t *testing.T) string {
	t.Helper()
	m := miniredis.RunT(t)
	dead := m.Addr()
	m.Close()
	return dead
}
