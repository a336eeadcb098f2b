package fxmodule_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/quorumlock/quorumlock/conformance/misuse"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
)

// The subtests of TestMisuseFxmodule are rows of the table "Bad input and
// the errors it gets" of docs/errors.md (TestReadmeBadInputTable, in core,
// checks that each one named there exists).

// newFails calls fxmodule.New with cfg, checks that it made no Locker,
// and returns its error.
func newFails(t *testing.T, cfg fxmodule.Config) error {
	t.Helper()
	res, err := fxmodule.New(fxmodule.Params{Config: cfg})
	require.Nil(t, res.Locker)
	require.Error(t, err)
	return err
}

func TestMisuseFxmodule(t *testing.T) {
	some := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	t.Run("no_addresses", func(t *testing.T) {
		t.Parallel()
		err := newFails(t, fxmodule.Config{})
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			`fxmodule: Config.Addrs is empty and no node was contributed to group "quorumlock.nodes": give the servers' addresses`)
	})
	t.Run("unknown_driver", func(t *testing.T) {
		t.Parallel()
		err := newFails(t, fxmodule.Config{Driver: "jedis", Addrs: some})
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			`fxmodule: Config.Driver: unknown driver "jedis": want goredis, redigo, rueidis or valkey`)
	})
	t.Run("unknown_strategy", func(t *testing.T) {
		t.Parallel()
		err := newFails(t, fxmodule.Config{Strategy: "random", Addrs: some})
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			`fxmodule: Config.Strategy: unknown strategy "random": want parallel, sequential or failfast`)
	})
	t.Run("redigo_cluster", func(t *testing.T) {
		t.Parallel()
		err := newFails(t, fxmodule.Config{Driver: "redigo", Cluster: true, Addrs: some})
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			"fxmodule: Config.Cluster: redigo has no Redis Cluster client; use driver goredis, rueidis or valkey for a cluster")
	})
	t.Run("leader_hook_empty_key", func(t *testing.T) {
		t.Parallel()
		err := fx.New(fx.NopLogger, fxmodule.Module, fx.Supply(fxmodule.Config{Addrs: some}),
			fxmodule.LeaderHook("", func() fx.Hook { return fx.Hook{} })).Err()
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "fxmodule: LeaderHook: key is empty")
	})
	t.Run("empty_address", func(t *testing.T) {
		t.Parallel()
		err := newFails(t, fxmodule.Config{Addrs: []string{"127.0.0.1:1", " "}})
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			"fxmodule: Config.Addrs: address 1 is empty")
	})
	t.Run("negative_value", func(t *testing.T) {
		t.Parallel()
		err := newFails(t, fxmodule.Config{TTL: -time.Second, Addrs: some})
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "fxmodule: Config.TTL: -1s is negative")
		require.ErrorContains(t, newFails(t, fxmodule.Config{Tries: -1, Addrs: some}), "fxmodule: Config.Tries: -1 is negative")
		err = newFails(t, fxmodule.Config{NodeTimeout: -time.Millisecond, Quorum: -2, Addrs: some})
		require.ErrorContains(t, err, "fxmodule: Config.NodeTimeout: -1ms is negative")
		require.ErrorContains(t, err, "Config.Quorum: -2 is negative", "every bad field is named at once")
	})
	t.Run("retry_max_below_min", func(t *testing.T) {
		t.Parallel()
		err := newFails(t, fxmodule.Config{RetryMin: time.Second, RetryMax: time.Millisecond, Addrs: some})
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			"fxmodule: Config.RetryMax: 1ms is less than the minimum retry delay 1s (Config.RetryMin)")
	})
	t.Run("core_refuses_the_config", func(t *testing.T) {
		t.Parallel()
		err := newFails(t, fxmodule.Config{Driver: fxmodule.DriverGoRedis, Quorum: 1, Addrs: some})
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "fxmodule: quorumlock: invalid argument: quorum 1 is impossible for 3 nodes")
		err = newFails(t, fxmodule.Config{Driver: fxmodule.DriverGoRedis, TTL: time.Second, NodeTimeout: 2 * time.Second, Addrs: some})
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "fxmodule: quorumlock: invalid argument: node timeout 2s must be less than TTL - drift")
	})
	t.Run("bad_env_variable", func(t *testing.T) {
		t.Setenv("QUORUMLOCK_TTL", "10")
		t.Setenv("QUORUMLOCK_TRIES", "many")
		_, err := fxmodule.ConfigFromEnv("")
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, `fxmodule: configuration from the environment: QUORUMLOCK_TTL: "10" is not a duration (want a Go duration such as 10s or 50ms)`)
		require.ErrorContains(t, err, `QUORUMLOCK_TRIES: "many" is not an integer`, "every bad variable is named at once")
	})
	t.Run("unreachable_at_start", func(t *testing.T) {
		t.Parallel()
		dead, silent := redistest.DeadAddr(t), redistest.SilentAddr(t)
		const ping = 300 * time.Millisecond
		app, _ := newApp(t, fxmodule.Config{Driver: fxmodule.DriverGoRedis, Addrs: []string{dead, silent, redistest.DeadAddr(t)}, PingTimeout: ping})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		err := app.Start(ctx)
		assert.Less(t, time.Since(start), ping+time.Second, "bounded by PingTimeout")
		require.ErrorIs(t, err, core.ErrUnavailable)
		require.ErrorContains(t, err, "fxmodule: 3 of 3 quorumlock nodes unreachable at start (tolerated: 1, quorum: 2): node "+dead+": dial tcp "+dead+": connect: connection refused")
		require.ErrorContains(t, err, "node "+silent+": ", "i/o timeout, or context deadline exceeded: whichever of go-redis's socket deadline and the context fires first")
		require.ErrorContains(t, err, "node "+silent+": no answer within PingTimeout (300ms): ", "the deadline is named, whichever fired")
		var ue *fxmodule.UnreachableError
		require.ErrorAs(t, err, &ue)
		assert.Len(t, ue.Down, 3)
	})
}
