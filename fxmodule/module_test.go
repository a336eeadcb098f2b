package fxmodule_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/backends/redigo"
	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
	fxgoredis "github.com/quorumlock/quorumlock/fxmodule/goredis"
	fxrueidis "github.com/quorumlock/quorumlock/fxmodule/rueidis"
)

var drivers = []string{fxmodule.DriverGoRedis, fxmodule.DriverRedigo, fxmodule.DriverRueidis, fxmodule.DriverValkey}

// newApp builds a test app of the module, cfg and extra, and returns it
// with the Locker it provides.
func newApp(t *testing.T, cfg fxmodule.Config, extra ...fx.Option) (*fxtest.App, *core.Locker) {
	t.Helper()
	var locker *core.Locker
	opts := append([]fx.Option{fxmodule.Module, fx.Supply(cfg), fx.Populate(&locker)}, extra...)
	return fxtest.New(t, opts...), locker
}

// acquireRelease takes key through locker, checks that every one of addrs
// holds it, releases it and checks that none does.
func acquireRelease(t *testing.T, locker *core.Locker, addrs []string, key string) {
	t.Helper()
	ctx := testCtx(t)
	lock, err := locker.Acquire(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, addrs, holders(t, addrs, key), "every node holds the lock")
	require.NoError(t, lock.Release(ctx))
	assert.Empty(t, holders(t, addrs, key), "released everywhere")
}

func TestModuleWithEachDriver(t *testing.T) {
	addrs := servers(t)
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			app, locker := newApp(t, fxmodule.Config{Driver: driver, Addrs: addrs})
			app.RequireStart()
			assert.Equal(t, 2, locker.Quorum())
			acquireRelease(t, locker, addrs, "fxmodule:"+t.Name())
			app.RequireStop()
		})
	}
}

func TestStartNamesUnreachableNode(t *testing.T) {
	live := servers(t)
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			dead := deadAddr(t)
			addrs := []string{live[0], dead, live[1]}

			app, _ := newApp(t, fxmodule.Config{Driver: driver, Addrs: addrs, RequireAllNodes: true})
			err := app.Start(testCtx(t))
			require.Error(t, err, "one node of three is down and none may be")
			assert.Contains(t, err.Error(), "node "+dead+": ")
			assert.NotContains(t, err.Error(), live[0])
			var ue *fxmodule.UnreachableError
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, 3, ue.Nodes)
			require.Len(t, ue.Down, 1)
			assert.Equal(t, dead, ue.Down[0].Node)
			assert.ErrorIs(t, err, core.ErrUnavailable)

			// Tolerated by default (N − quorum): the app starts, says so in
			// the log, and locks work on the two others.
			var logged bytes.Buffer
			app, locker := newApp(t, fxmodule.Config{Driver: driver, Addrs: addrs},
				fx.Supply(slog.New(slog.NewTextHandler(&logged, nil))))
			app.RequireStart()
			assert.Contains(t, logged.String(), "node="+dead)
			ctx := testCtx(t)
			key := "fxmodule:" + t.Name()
			lock, err := locker.Acquire(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, []string{live[0], live[1]}, holders(t, live[:2], key))
			require.NoError(t, lock.Release(ctx))
			app.RequireStop()

			// Tolerating more than the quorum allows still fails.
			app, _ = newApp(t, fxmodule.Config{Driver: driver, Addrs: []string{live[0], dead, deadAddr(t)}, TolerateDown: 2})
			err = app.Start(testCtx(t))
			require.Error(t, err, "two of three down leave no quorum")
			assert.Contains(t, err.Error(), "2 of 3 quorumlock nodes unreachable")
		})
	}
}

func TestStopReleasesHeldLocks(t *testing.T) {
	addrs := servers(t)
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			app, locker := newApp(t, fxmodule.Config{Driver: driver, Addrs: addrs})
			app.RequireStart()
			ctx := testCtx(t)
			key := "fxmodule:" + t.Name()
			lock, err := locker.Acquire(ctx, key)
			require.NoError(t, err)
			kept, err := locker.Acquire(ctx, key+":kept")
			require.NoError(t, err)
			require.NoError(t, kept.KeepAlive())
			require.Equal(t, addrs, holders(t, addrs, key))

			app.RequireStop() // neither lock released by the test

			assert.Empty(t, holders(t, addrs, key), "stop released the held lock")
			assert.Empty(t, holders(t, addrs, key+":kept"), "and the kept-alive one")
			assert.ErrorIs(t, lock.Err(), core.ErrReleased)
			_, err = locker.TryAcquire(ctx, key)
			assert.ErrorIs(t, err, core.ErrClosed)
		})
	}
}

func TestUserNodesAndClientsStayOpen(t *testing.T) {
	t.Parallel()
	addrs := servers(t)
	ctx := testCtx(t)

	rdb := redis.NewClient(goredis.ClientOptions(addrs[0]))
	defer rdb.Close()
	rc, err := rueidis.NewClient(qlrueidis.ClientOption(addrs[1]))
	require.NoError(t, err)
	defer rc.Close()
	pool := redigo.NewPool(addrs[2])
	defer pool.Close()

	dead := deadAddr(t)
	app, locker := newApp(t,
		// Config's servers are ignored when the app gives nodes.
		fxmodule.Config{Addrs: []string{dead}},
		fx.Supply(fx.Annotate(rdb, fx.As(new(redis.UniversalClient)))),
		fx.Supply(fx.Annotate(rc, fx.As(new(rueidis.Client)))),
		fx.Supply(pool),
		fxgoredis.Node(),
		fxrueidis.Node(qlrueidis.WithName(addrs[1])),
		fxmodule.Node(func(p *redigoredis.Pool) (*redigo.Node, error) {
			return redigo.New(p, redigo.WithName(addrs[2]))
		}),
	)
	app.RequireStart()
	assert.Contains(t, locker.String(), addrs[0])
	assert.NotContains(t, locker.String(), dead)
	key := "fxmodule:" + t.Name()
	lock, err := locker.Acquire(ctx, key)
	require.NoError(t, err)
	require.Equal(t, addrs, holders(t, addrs, key))
	app.RequireStop()
	assert.ErrorIs(t, lock.Err(), core.ErrReleased)
	assert.Empty(t, holders(t, addrs, key))

	// The app's clients still work.
	assert.NoError(t, rdb.Ping(ctx).Err(), "go-redis client")
	assert.NoError(t, rc.Do(ctx, rc.B().Ping().Build()).Error(), "rueidis client")
	conn, err := pool.GetContext(ctx)
	require.NoError(t, err, "redigo pool")
	_, err = redigoredis.DoContext(conn, ctx, "PING")
	assert.NoError(t, err)
	assert.NoError(t, conn.Close())
}

// counter is an Observer that counts events by kind.
type counter struct{ acquire, release atomic.Int32 }

func (c *counter) Observe(_ context.Context, e core.Event) {
	switch e.Kind {
	case core.OpAcquire:
		c.acquire.Add(1)
	case core.OpRelease:
		c.release.Add(1)
	}
}

func TestContributedOptions(t *testing.T) {
	t.Parallel()
	addrs := servers(t)
	var fromOptions, fromConstructor, fromGraph counter
	type prefix string
	app, locker := newApp(t,
		fxmodule.Config{Driver: fxmodule.DriverGoRedis, Addrs: addrs, KeyPrefix: "config:"},
		fxmodule.Options(core.WithObserver(&fromOptions)),
		fx.Supply(prefix("group:")),
		fxmodule.Option(func(p prefix) core.Option { return core.WithKeyPrefix(string(p)) }),
		fxmodule.Option(func() (core.Option, error) { return core.WithObserver(&fromConstructor), nil }),
		fx.Supply(fx.Annotate(&fromGraph, fx.As(new(core.Observer)))),
	)
	app.RequireStart()
	ctx := testCtx(t)
	key := "fxmodule:" + t.Name()
	lock, err := locker.Acquire(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, addrs, holders(t, addrs, "group:"+key), "a contributed option wins over Config")
	require.NoError(t, lock.Release(ctx))
	app.RequireStop()
	for name, c := range map[string]*counter{"Options": &fromOptions, "Option": &fromConstructor, "Observer in the graph": &fromGraph} {
		assert.Equal(t, int32(1), c.acquire.Load(), name)
		assert.Equal(t, int32(1), c.release.Load(), name)
	}
}

func TestDecorate(t *testing.T) {
	t.Parallel()
	addrs := servers(t)
	var decorated *core.Locker
	app, locker := newApp(t,
		fxmodule.Config{Driver: fxmodule.DriverRedigo, Addrs: addrs},
		fx.Decorate(func(c fxmodule.Config) fxmodule.Config { c.KeyPrefix = "decorated:"; return c }),
		fx.Decorate(func(l *core.Locker) *core.Locker { decorated = l; return l }),
	)
	app.RequireStart()
	assert.Same(t, decorated, locker)
	ctx := testCtx(t)
	key := "fxmodule:" + t.Name()
	lock, err := locker.Acquire(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, addrs, holders(t, addrs, "decorated:"+key))
	require.NoError(t, lock.Release(ctx))
	app.RequireStop()
}

func TestCluster(t *testing.T) {
	t.Parallel()
	redistest.RequireServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster, err := redistest.StartCluster(ctx, 3)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cluster.Close()) })

	for _, driver := range []string{fxmodule.DriverGoRedis, fxmodule.DriverRueidis, fxmodule.DriverValkey} {
		t.Run(driver, func(t *testing.T) {
			app, locker := newApp(t, fxmodule.Config{Driver: driver, Addrs: cluster.Addrs()[:2], Cluster: true})
			app.RequireStart()
			assert.Equal(t, 1, locker.Quorum(), "a cluster is one node")
			ctx := testCtx(t)
			// Keys in every master's slots.
			for _, key := range []string{"fxmodule:a", "fxmodule:b", "fxmodule:c", "fxmodule:d"} {
				key += ":" + driver
				lock, err := locker.Acquire(ctx, key)
				require.NoError(t, err)
				n, err := cluster.Control().Exists(ctx, key).Result()
				require.NoError(t, err)
				assert.Equal(t, int64(1), n, "the cluster holds %s", key)
				require.NoError(t, lock.Release(ctx))
			}
			held, err := locker.Acquire(ctx, "fxmodule:held:"+driver)
			require.NoError(t, err)
			app.RequireStop()
			assert.ErrorIs(t, held.Err(), core.ErrReleased)
			n, err := cluster.Control().Exists(ctx, "fxmodule:held:"+driver).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "stop released the held lock")
		})
	}
}

func TestNewWithoutFx(t *testing.T) {
	t.Parallel()
	addrs := servers(t)
	res, err := fxmodule.New(fxmodule.Params{Config: fxmodule.Config{Driver: fxmodule.DriverGoRedis, Addrs: addrs, TTL: 5 * time.Second}})
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, res.Locker.TTL())
	acquireRelease(t, res.Locker, addrs, "fxmodule:"+t.Name())
	require.NoError(t, res.Locker.Close())
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  fxmodule.Config
		want string
	}{
		{"no addresses", fxmodule.Config{}, "Config.Addrs is empty"},
		{"unknown driver", fxmodule.Config{Driver: "jedis", Addrs: []string{"127.0.0.1:1"}}, `Config.Driver: unknown driver "jedis"`},
		{"unknown strategy", fxmodule.Config{Strategy: "random", Addrs: []string{"127.0.0.1:1"}}, `Config.Strategy: unknown strategy "random"`},
		{"redigo cluster", fxmodule.Config{Driver: "redigo", Cluster: true, Addrs: []string{"127.0.0.1:1"}}, "Config.Cluster: redigo has no Redis Cluster client"},
		{"negative TolerateDown", fxmodule.Config{TolerateDown: -1, Addrs: []string{"127.0.0.1:1"}}, "Config.TolerateDown: -1 is negative"},
		{"retry range", fxmodule.Config{RetryMin: time.Second, RetryMax: time.Millisecond, Addrs: []string{"127.0.0.1:1"}}, "Config.RetryMax: 1ms is less than"},
		{"impossible quorum", fxmodule.Config{Driver: "goredis", Quorum: 1, Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}}, "quorum 1 is impossible"},
		{"TTL under node timeout", fxmodule.Config{Driver: "redigo", TTL: 40 * time.Millisecond, Addrs: []string{"127.0.0.1:1"}}, "WithNodeTimeout"},
		{"guard and no guard", fxmodule.Config{RestartGuard: time.Minute, DisableRestartGuard: true, Addrs: []string{"127.0.0.1:1"}}, "Config.RestartGuard: is set while Config.DisableRestartGuard turns the guard off"},
		{"guard under the TTL", fxmodule.Config{Driver: "goredis", TTL: time.Minute, RestartGuard: time.Second, Addrs: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}}, "restart guard max TTL 1s is shorter than the TTL 1m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fxmodule.New(fxmodule.Params{Config: tc.cfg})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	// In an app, the error stops construction.
	var locker *core.Locker
	app := fx.New(fx.NopLogger, fxmodule.Module, fx.Supply(fxmodule.Config{Driver: "jedis"}), fx.Populate(&locker))
	err := app.Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unknown driver")
	assert.False(t, errors.Is(err, core.ErrUnavailable))
}

// TestFreshServers starts an app over three servers started a moment
// before: the app starts, and its first Acquire waits until the restart
// guard lets the servers vote (a short TTL keeps the wait short), within
// its context, instead of failing.
func TestFreshServers(t *testing.T) {
	t.Parallel()
	redistest.RequireServer(t)
	var addrs []string
	for range 3 {
		s, err := redistest.StartServer(testCtx(t), redistest.WithFresh(true))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		addrs = append(addrs, s.Addr())
	}
	cfg := fxmodule.Config{Driver: fxmodule.DriverGoRedis, Addrs: addrs, TTL: time.Second, Tries: 1}
	app, locker := newApp(t, cfg)
	app.RequireStart()
	_, err := locker.TryAcquire(testCtx(t), "fxmodule:fresh")
	require.ErrorIs(t, err, core.ErrNodeRestarted, "fresh servers are young; TryAcquire does not wait")
	lock, err := locker.Acquire(testCtx(t), "fxmodule:fresh")
	require.NoError(t, err, "Acquire waits for the servers to vote")
	assert.GreaterOrEqual(t, len(holders(t, addrs, "fxmodule:fresh")), 2, "a quorum of them")
	require.NoError(t, lock.Release(testCtx(t)))
	app.RequireStop()
}

// Build makes the module's Locker without fx, with the same start-up
// check: one node of three down is tolerated by default, and refused with
// RequireAllNodes.
func TestBuild(t *testing.T) {
	live := servers(t)
	addrs := []string{live[0], deadAddr(t), live[1]}
	ctx := testCtx(t)
	locker, err := fxmodule.Build(ctx, fxmodule.Config{Driver: fxmodule.DriverRedigo, Addrs: addrs}, core.WithKeyPrefix("build:"))
	require.NoError(t, err)
	lock, err := locker.Acquire(ctx, t.Name())
	require.NoError(t, err)
	assert.Equal(t, []string{live[0], live[1]}, holders(t, live[:2], "build:"+t.Name()), "the options were applied")
	require.NoError(t, lock.Release(ctx))
	require.NoError(t, locker.Close())

	_, err = fxmodule.Build(ctx, fxmodule.Config{Driver: fxmodule.DriverRedigo, Addrs: addrs, RequireAllNodes: true})
	var ue *fxmodule.UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, addrs[1], ue.Down[0].Node)

	_, err = fxmodule.Build(ctx, fxmodule.Config{})
	require.ErrorIs(t, err, core.ErrInvalidArgument, "no addresses")
	//lint:ignore SA1012 a nil context is the misuse under test
	_, err = fxmodule.Build(nil, fxmodule.Config{Addrs: live}) //nolint:staticcheck
	require.ErrorIs(t, err, core.ErrInvalidArgument)
}

// The stop hook honours its context: a Do function still at work is
// cancelled (cause core.ErrClosed) and waited for only until the stop
// context ends, and its lock is not released under it.
func TestStopHonoursItsContext(t *testing.T) {
	addrs := servers(t)
	app, locker := newApp(t, fxmodule.Config{Driver: "goredis", Addrs: addrs})
	app.RequireStart()
	key := "fxmodule:" + t.Name()
	started, finish := make(chan struct{}), make(chan struct{})
	causes, did := make(chan error, 1), make(chan error, 1)
	go func() {
		did <- locker.Do(testCtx(t), key, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			causes <- context.Cause(ctx)
			<-finish // winds down for longer than the stop allows
			return nil
		})
	}()
	<-started
	stopCtx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	defer cancel()
	err := app.Stop(stopCtx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the stop hook returns when its context ends")
	assert.ErrorIs(t, <-causes, core.ErrClosed)
	assert.Equal(t, addrs, holders(t, addrs, key), "not released while fn runs")
	close(finish)
	require.ErrorIs(t, <-did, core.ErrClosed)
	assert.Empty(t, holders(t, addrs, key), "released when fn returned")
	require.NoError(t, locker.Close())
}
