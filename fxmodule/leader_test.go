package fxmodule_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/fxmodule"
)

// leaderEvents records what the LeaderHooks of several apps did, in
// order, and whether two ran at once.
type leaderEvents struct {
	events  chan string
	inside  atomic.Int32
	overlap atomic.Int32
}

// hook returns a LeaderHook constructor whose hook reports as app name.
func (e *leaderEvents) hook(name string) func() fx.Hook {
	return func() fx.Hook {
		return fx.Hook{
			OnStart: func(context.Context) error {
				if e.inside.Add(1) > 1 {
					e.overlap.Add(1)
				}
				e.events <- "start " + name
				return nil
			},
			OnStop: func(context.Context) error {
				e.inside.Add(-1)
				e.events <- "stop " + name
				return nil
			},
		}
	}
}

// next returns the next event, within 30 s.
func (e *leaderEvents) next(t *testing.T) string {
	t.Helper()
	select {
	case ev := <-e.events:
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no leader event within 30 s")
		return ""
	}
}

// Two apps with a LeaderHook on one key, over real servers: one runs the
// hook; stopping it stops its hook before the other's starts. A term lost
// (the key deleted on a majority) stops the hook, and the app leads again.
// No hook runs beside another, and stopping the apps leaves no goroutine
// (TestMain's goleak check).
func TestLeaderHook(t *testing.T) {
	t.Parallel()
	addrs := servers(t)
	key := "fxmodule:" + t.Name()
	cfg := fxmodule.Config{Driver: fxmodule.DriverGoRedis, Addrs: addrs, TTL: 3 * time.Second, NodeTimeout: 500 * time.Millisecond}
	e := &leaderEvents{events: make(chan string, 16)}
	apps := map[string]*fxtest.App{}
	for _, name := range []string{"a", "b"} {
		apps[name] = fxtest.New(t, fx.NopLogger, fxmodule.Module, fx.Supply(cfg), fxmodule.LeaderHook(key, e.hook(name)))
		apps[name].RequireStart()
	}
	first := e.next(t)
	require.Contains(t, []string{"start a", "start b"}, first)
	leader, other := first[len("start "):], "a"
	if leader == "a" {
		other = "b"
	}
	// The other campaigns meanwhile: it waits in the key's queue.
	queue, ok := driver.QueueKey(key)
	require.True(t, ok)
	require.Eventually(t, func() bool {
		for _, a := range addrs {
			if n, err := plainClient(t, a).LLen(testCtx(t), queue).Result(); err == nil && n > 0 {
				return true
			}
		}
		return false
	}, 30*time.Second, 5*time.Millisecond, "the other app waits to lead")
	apps[leader].RequireStop()
	assert.Equal(t, "stop "+leader, e.next(t), "the leader's hook stops with its app")
	assert.Equal(t, "start "+other, e.next(t), "then the other leads")

	for _, a := range addrs[:2] {
		require.NoError(t, plainClient(t, a).Del(testCtx(t), key).Err())
	}
	assert.Equal(t, "stop "+other, e.next(t), "a lost term stops the hook")
	assert.Equal(t, "start "+other, e.next(t), "and the app leads again")
	apps[other].RequireStop()
	assert.Equal(t, "stop "+other, e.next(t))
	assert.Zero(t, e.overlap.Load(), "two hooks ran at once")
	assert.Empty(t, holders(t, addrs, key), "resigned")
}

// An OnStart that fails while the app leads shuts the app down, resigned.
func TestLeaderHookFails(t *testing.T) {
	t.Parallel()
	addrs := servers(t)
	key := "fxmodule:" + t.Name()
	app := fxtest.New(t, fx.NopLogger, fxmodule.Module,
		fx.Supply(fxmodule.Config{Driver: fxmodule.DriverGoRedis, Addrs: addrs, NodeTimeout: 500 * time.Millisecond}),
		fxmodule.LeaderHook(key, func() fx.Hook {
			return fx.Hook{OnStart: func(context.Context) error { return errors.New("no scheduler today") }}
		}))
	app.RequireStart()
	select {
	case sig := <-app.Wait():
		assert.Equal(t, 1, sig.ExitCode)
	case <-time.After(30 * time.Second):
		t.Fatal("the app was not shut down")
	}
	app.RequireStop()
	assert.Empty(t, holders(t, addrs, key), "resigned")
}

// OnStart's context lives as long as the term: a hook that starts a loop
// with it (go s.run(ctx)) keeps running while the app leads. It used to
// end as soon as OnStart returned.
func TestLeaderHookContextLastsTheTerm(t *testing.T) {
	t.Parallel()
	addrs := servers(t)
	cfg := fxmodule.Config{Driver: fxmodule.DriverGoRedis, Addrs: addrs, TTL: 3 * time.Second, NodeTimeout: 500 * time.Millisecond}
	got := make(chan context.Context, 1)
	app := fxtest.New(t, fx.NopLogger, fxmodule.Module, fx.Supply(cfg),
		fxmodule.LeaderHook("fxmodule:"+t.Name(), func() fx.Hook {
			return fx.Hook{OnStart: func(ctx context.Context) error { got <- ctx; return nil }}
		}))
	app.RequireStart()
	ctx := <-got
	// A bounded wait for a non-event: the bug ended the context at once.
	require.Never(t, func() bool { return ctx.Err() != nil }, 300*time.Millisecond, 5*time.Millisecond, "OnStart's context ended while the app leads")
	app.RequireStop()
	require.Error(t, ctx.Err(), "and it ends with the app")
}
