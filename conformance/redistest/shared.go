package redistest

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// process holds the servers that the tests of one test binary share:
// SharedServers's, started once, and TestServers's pool. Main, or
// CloseServers, stops them.
var process struct {
	mu     sync.Mutex
	shared []target
	pool   *pool
}

// SharedServers returns n redis-servers shared by every test of the test
// binary that asks for them, started by the first test that needs them
// and stopped by Main (or CloseServers). The tests isolate themselves by
// key and inject no faults into them.
func SharedServers(t testing.TB, n int) []*Server {
	t.Helper()
	RequireServer(t)
	process.mu.Lock()
	defer process.mu.Unlock()
	if missing := n - len(process.shared); missing > 0 {
		list, err := startAll(t.Context(), startSingle, missing)
		process.shared = append(process.shared, list...)
		require.NoError(t, err, "starting the shared redis-servers")
	}
	return serversOf(process.shared[:n])
}

// TestServers returns n redis-servers that only t uses, as StartTestServer
// starts them (adopted for the restart guard, without persistence), taken
// from a pool that the test binary keeps. Faults may be injected. When t
// ends, once the cleanups registered after this call have run (they must
// close t's clients), the servers go back to the pool, where they are made
// what a new server is: resumed, started again if stopped or if t changed
// their configuration or users, emptied (FLUSHALL, SCRIPT FLUSH, FUNCTION
// FLUSH, CONFIG RESETSTAT, other clients' connections closed) and adopted.
// Only their uptime and process tell them from new ones. Main (or
// CloseServers) stops the pool. t must not Close them.
func TestServers(t testing.TB, n int) []*Server {
	t.Helper()
	RequireServer(t)
	process.mu.Lock()
	if process.pool == nil {
		process.pool = newPool(startSingle)
	}
	p := process.pool
	process.mu.Unlock()
	list, err := p.take(t.Context(), n)
	t.Cleanup(func() { p.give(list) })
	require.NoError(t, err, "starting redis-servers")
	return serversOf(list)
}

// CloseServers stops the servers of SharedServers and TestServers, after
// the resets under way. Main calls it once the tests have run; a TestMain
// of its own calls it too. Later calls start new servers.
func CloseServers() error {
	process.mu.Lock()
	shared, p := process.shared, process.pool
	process.shared, process.pool = nil, nil
	process.mu.Unlock()
	var errs []error
	for _, tg := range shared {
		errs = append(errs, tg.close())
	}
	if p != nil {
		errs = append(errs, p.close())
	}
	return errors.Join(errs...)
}

func serversOf(list []target) []*Server {
	out := make([]*Server, len(list))
	for i, tg := range list {
		out[i] = tg.(*single).Server
	}
	return out
}
