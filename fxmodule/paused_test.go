package fxmodule_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/fxmodule"
)

// A server that accepts connections but answers nothing costs the start-up
// check its PingTimeout, not more, and is named.
func TestStartBoundedByPingTimeout(t *testing.T) {
	t.Parallel()
	live := servers(t)
	srv := redistest.TestServers(t, 1)[0]
	require.NoError(t, srv.Pause())

	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			begin := time.Now()
			app, _ := newApp(t, fxmodule.Config{Driver: driver, Addrs: []string{live[0], srv.Addr(), live[1]}, PingTimeout: 200 * time.Millisecond, RequireAllNodes: true})
			// A rueidis or valkey-go client connects when made, but the
			// module waits for a hung server's one node timeout at most
			// (the backends' Dial), not its 5 s dial timeout.
			assert.Less(t, time.Since(begin), 3*time.Second, "construction")
			begin = time.Now()
			err := app.Start(testCtx(t))
			took := time.Since(begin)
			require.Error(t, err)
			assert.ErrorContains(t, err, "node "+srv.Addr()+": ")
			// 10 PingTimeouts: wide for a loaded machine, and still well
			// below the drivers' own 5 s timeouts that it must not wait.
			assert.Less(t, took, 2*time.Second, "start")
		})
	}
}

// A node down at start (tolerated) takes part once its server is up.
func TestNodeDownAtStartJoinsLater(t *testing.T) {
	live := servers(t)
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			port, err := redistest.FreePort()
			require.NoError(t, err)
			late := "127.0.0.1:" + strconv.Itoa(port)
			addrs := []string{live[0], live[1], late}
			app, locker := newApp(t, fxmodule.Config{Driver: driver, Addrs: addrs, TolerateDown: 1})
			app.RequireStart()

			srv, err := redistest.StartServer(testCtx(t), redistest.WithPort(port))
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, srv.Close()) })

			ctx := testCtx(t)
			key := "fxmodule:" + t.Name()
			lock, err := locker.Acquire(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, addrs, holders(t, addrs, key), "the late node holds the lock too")
			require.NoError(t, lock.Release(ctx))
			app.RequireStop()
		})
	}
}
