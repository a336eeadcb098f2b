package fxmodule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
)

func TestConfigFromEnvReadsEveryVariable(t *testing.T) {
	for k, v := range map[string]string{
		"QUORUMLOCK_DRIVER":          "GoRedis",
		"QUORUMLOCK_ADDRS":           " 10.0.0.1:6379, 10.0.0.2:6379,,10.0.0.3:6379 ",
		"QUORUMLOCK_CLUSTER":         "true",
		"QUORUMLOCK_STRATEGY":        "failfast",
		"QUORUMLOCK_STOP_AT_QUORUM":  "1",
		"QUORUMLOCK_TTL":             "30s",
		"QUORUMLOCK_TRIES":           "7",
		"QUORUMLOCK_RETRY_MIN":       "10ms",
		"QUORUMLOCK_RETRY_MAX":       "1s",
		"QUORUMLOCK_NODE_TIMEOUT":    "100ms",
		"QUORUMLOCK_QUORUM":          "3",
		"QUORUMLOCK_KEY_PREFIX":      "locks:",
		"QUORUMLOCK_KEEP_ALIVE":      "5s",
		"QUORUMLOCK_MAX_HOLD":        "1m",
		"QUORUMLOCK_FENCING":         "true",
		"QUORUMLOCK_RESTART_GUARD":   "45s",
		"QUORUMLOCK_ADOPT_NODES":     "true",
		"QUORUMLOCK_WAKE_ON_RELEASE": "false",
		"QUORUMLOCK_USERNAME":        "app",
		"QUORUMLOCK_PASSWORD":        " s3cret ",
		"QUORUMLOCK_TLS":             "true",
		"QUORUMLOCK_TOLERATE_DOWN":   "1",
		"QUORUMLOCK_PING_TIMEOUT":    "500ms",
	} {
		t.Setenv(k, v)
	}
	c, err := fxmodule.ConfigFromEnv("")
	require.NoError(t, err)
	assert.Equal(t, fxmodule.Config{
		Driver:               "GoRedis",
		Addrs:                []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		Cluster:              true,
		Strategy:             "failfast",
		StopAtQuorum:         true,
		TTL:                  30 * time.Second,
		Tries:                7,
		RetryMin:             10 * time.Millisecond,
		RetryMax:             time.Second,
		NodeTimeout:          100 * time.Millisecond,
		Quorum:               3,
		KeyPrefix:            "locks:",
		KeepAlive:            5 * time.Second,
		MaxHold:              time.Minute,
		Fencing:              true,
		RestartGuard:         45 * time.Second,
		AdoptNodes:           true,
		DisableWakeOnRelease: true,
		Username:             "app",
		Password:             " s3cret ",
		TLS:                  true,
		TolerateDown:         1,
		PingTimeout:          500 * time.Millisecond,
	}, c)
}

func TestConfigFromEnvDefaultsAndPrefix(t *testing.T) {
	t.Setenv("QUORUMLOCK_DRIVER", "no-such-driver") // another prefix: not read
	t.Setenv("BILLING_LOCKS_ADDRS", "127.0.0.1:7000")
	t.Setenv("BILLING_LOCKS_WAKE_ON_RELEASE", "true")
	for _, prefix := range []string{"BILLING_LOCKS", "BILLING_LOCKS_"} {
		c, err := fxmodule.ConfigFromEnv(prefix)
		require.NoError(t, err, prefix)
		assert.Equal(t, fxmodule.Config{Addrs: []string{"127.0.0.1:7000"}}, c, "unset variables leave fields zero")
	}
	_, err := fxmodule.ConfigFromEnv("")
	assert.ErrorContains(t, err, "QUORUMLOCK_DRIVER")
}

func TestConfigFromEnvNamesBadVariables(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"QUORUMLOCK_DRIVER", "jedis", `unknown driver "jedis"`},
		{"QUORUMLOCK_CLUSTER", "yes please", "not a boolean"},
		{"QUORUMLOCK_STRATEGY", "random", `unknown strategy "random"`},
		{"QUORUMLOCK_STOP_AT_QUORUM", "maybe", "not a boolean"},
		{"QUORUMLOCK_TTL", "10", "not a duration"},
		{"QUORUMLOCK_TTL", "-1s", "negative"},
		{"QUORUMLOCK_TRIES", "many", "not an integer"},
		{"QUORUMLOCK_TRIES", "-3", "negative"},
		{"QUORUMLOCK_RETRY_MIN", "fast", "not a duration"},
		{"QUORUMLOCK_RETRY_MAX", "1x", "not a duration"},
		{"QUORUMLOCK_NODE_TIMEOUT", "50", "not a duration"},
		{"QUORUMLOCK_QUORUM", "2.5", "not an integer"},
		{"QUORUMLOCK_KEEP_ALIVE", "often", "not a duration"},
		{"QUORUMLOCK_MAX_HOLD", "-1m", "negative"},
		{"QUORUMLOCK_FENCING", "on", "not a boolean"},
		{"QUORUMLOCK_WAKE_ON_RELEASE", "nope", "not a boolean"},
		{"QUORUMLOCK_TLS", "tls1.3", "not a boolean"},
		{"QUORUMLOCK_TOLERATE_DOWN", "one", "not an integer"},
		{"QUORUMLOCK_PING_TIMEOUT", "soon", "not a duration"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			_, err := fxmodule.ConfigFromEnv("")
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.name+": ")
			assert.ErrorContains(t, err, tc.want)
		})
	}

	t.Run("redigo cluster", func(t *testing.T) {
		t.Setenv("QUORUMLOCK_DRIVER", "redigo")
		t.Setenv("QUORUMLOCK_CLUSTER", "true")
		_, err := fxmodule.ConfigFromEnv("")
		assert.ErrorContains(t, err, "QUORUMLOCK_CLUSTER: redigo has no Redis Cluster client")
	})
	t.Run("retry range", func(t *testing.T) {
		t.Setenv("QUORUMLOCK_RETRY_MIN", "1s")
		t.Setenv("QUORUMLOCK_RETRY_MAX", "10ms")
		_, err := fxmodule.ConfigFromEnv("")
		assert.ErrorContains(t, err, "QUORUMLOCK_RETRY_MAX: 10ms is less than the minimum retry delay 1s (QUORUMLOCK_RETRY_MIN)")
	})
	t.Run("all at once", func(t *testing.T) {
		t.Setenv("QUORUMLOCK_TTL", "x")
		t.Setenv("QUORUMLOCK_DRIVER", "x")
		_, err := fxmodule.ConfigFromEnv("")
		assert.ErrorContains(t, err, "QUORUMLOCK_TTL")
		assert.ErrorContains(t, err, "QUORUMLOCK_DRIVER")
	})
}

func TestFromEnv(t *testing.T) {
	addrs := servers(t)
	t.Setenv("FXTEST_DRIVER", "redigo")
	t.Setenv("FXTEST_ADDRS", addrs[0]+","+addrs[1]+","+addrs[2])
	t.Setenv("FXTEST_TTL", "7s")
	t.Setenv("FXTEST_KEY_PREFIX", "env:")
	var locker *core.Locker
	app := fxtest.New(t, fxmodule.Module, fxmodule.FromEnv("FXTEST"), fx.Populate(&locker))
	app.RequireStart()
	assert.Equal(t, 7*time.Second, locker.TTL())
	ctx := testCtx(t)
	key := "fxmodule:" + t.Name()
	lock, err := locker.Acquire(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, addrs, holders(t, addrs, "env:"+key))
	require.NoError(t, lock.Release(ctx))
	app.RequireStop()

	// A bad variable stops the app's construction.
	t.Setenv("FXTEST_TRIES", "lots")
	bad := fx.New(fx.NopLogger, fxmodule.Module, fxmodule.FromEnv("FXTEST"), fx.Populate(&locker))
	assert.ErrorContains(t, bad.Err(), "FXTEST_TRIES")
}
