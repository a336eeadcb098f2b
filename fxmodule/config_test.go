package fxmodule_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.yaml.in/yaml/v3"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
)

func TestConfigFromEnvReadsEveryVariable(t *testing.T) {
	for k, v := range map[string]string{
		"QUORUMLOCK_DRIVER":                  "GoRedis",
		"QUORUMLOCK_ADDRS":                   " 10.0.0.1:6379, 10.0.0.2:6379,,10.0.0.3:6379 ",
		"QUORUMLOCK_CLUSTER":                 "true",
		"QUORUMLOCK_STRATEGY":                "failfast",
		"QUORUMLOCK_STOP_AT_QUORUM":          "1",
		"QUORUMLOCK_TTL":                     "30s",
		"QUORUMLOCK_TRIES":                   "7",
		"QUORUMLOCK_RETRY_MIN":               "10ms",
		"QUORUMLOCK_RETRY_MAX":               "1s",
		"QUORUMLOCK_NODE_TIMEOUT":            "100ms",
		"QUORUMLOCK_QUORUM":                  "3",
		"QUORUMLOCK_KEY_PREFIX":              "locks:",
		"QUORUMLOCK_KEEP_ALIVE":              "5s",
		"QUORUMLOCK_MAX_HOLD":                "1m",
		"QUORUMLOCK_FENCING":                 "true",
		"QUORUMLOCK_RESTART_GUARD":           "45s",
		"QUORUMLOCK_DISABLE_RESTART_GUARD":   "false",
		"QUORUMLOCK_DISABLE_WAKE_ON_RELEASE": "true",
		"QUORUMLOCK_REQUIRE_ALL_NODES":       "true",
		"QUORUMLOCK_USERNAME":                "app",
		"QUORUMLOCK_PASSWORD":                " s3cret ",
		"QUORUMLOCK_TLS":                     "true",
		"QUORUMLOCK_TOLERATE_DOWN":           "1",
		"QUORUMLOCK_PING_TIMEOUT":            "500ms",
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
		DisableWakeOnRelease: true,
		RequireAllNodes:      true,
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
	t.Setenv("BILLING_LOCKS_DISABLE_WAKE_ON_RELEASE", "false")
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
		{"QUORUMLOCK_DISABLE_WAKE_ON_RELEASE", "nope", "not a boolean"},
		{"QUORUMLOCK_REQUIRE_ALL_NODES", "all", "not a boolean"},
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

// Every variable is the prefix and the field's name in upper snake case,
// and the yaml and json names are that name in lower case: one name per
// setting, wherever it is written.
func TestConfigNamesFollowTheFields(t *testing.T) {
	words := regexp.MustCompile(`[A-Z]+[a-z]*`) // TTL, TLS: one word each
	typ := reflect.TypeFor[fxmodule.Config]()
	for _, f := range reflect.VisibleFields(typ) {
		if f.Name == "TLSConfig" {
			assert.Equal(t, "-", f.Tag.Get("yaml"), "a *tls.Config cannot be written as text")
			continue
		}
		snake := strings.ToLower(strings.Join(words.FindAllString(f.Name, -1), "_"))
		assert.Equal(t, snake, f.Tag.Get("yaml"), f.Name)
		assert.Equal(t, snake+",omitempty", f.Tag.Get("json"), f.Name)

		// Set through its variable, the field changes.
		env := "QUORUMLOCK_" + strings.ToUpper(snake)
		value := map[reflect.Kind]string{reflect.String: "goredis", reflect.Bool: "true", reflect.Int: "2",
			reflect.Int64: "3s", reflect.Slice: "127.0.0.1:1"}[f.Type.Kind()]
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, value)
			c, err := fxmodule.ConfigFromEnv("")
			if err != nil {
				assert.ErrorContains(t, err, env, "read, and refused for its value only")
				return
			}
			assert.False(t, reflect.ValueOf(c).FieldByIndex(f.Index).IsZero(), "%s sets Config.%s", env, f.Name)
		})
	}
}

// The adoption setting is gone; left set, it is an error rather than a
// silent change of behaviour.
func TestConfigFromEnvRefusesAdoptNodes(t *testing.T) {
	t.Setenv("QUORUMLOCK_ADOPT_NODES", "true")
	_, err := fxmodule.ConfigFromEnv("")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	assert.ErrorContains(t, err, "QUORUMLOCK_ADOPT_NODES is no longer read")
	assert.ErrorContains(t, err, "SET quorumlock:birth 0")
}

func TestConfigFromFiles(t *testing.T) {
	want := fxmodule.Config{Driver: "redigo", Addrs: []string{"a:1", "b:2", "c:3"}, TTL: 30 * time.Second,
		NodeTimeout: 100 * time.Millisecond, DisableRestartGuard: true, TolerateDown: 1}

	var fromYAML fxmodule.Config
	require.NoError(t, yaml.Unmarshal([]byte(`driver: redigo
addrs: [a:1, b:2, c:3]
ttl: 30s
node_timeout: 100ms
disable_restart_guard: true
tolerate_down: 1
`), &fromYAML))
	assert.Equal(t, want, fromYAML)

	var fromJSON fxmodule.Config
	require.NoError(t, json.Unmarshal([]byte(`{"driver": "redigo", "addrs": ["a:1", "b:2", "c:3"], "ttl": "30s",
		"node_timeout": 100000000, "disable_restart_guard": true, "tolerate_down": 1}`), &fromJSON))
	assert.Equal(t, want, fromJSON, "durations as Go durations or nanoseconds")
	out, err := json.Marshal(want)
	require.NoError(t, err)
	var back fxmodule.Config
	require.NoError(t, json.Unmarshal(out, &back))
	assert.Equal(t, want, back, "a round trip")

	for doc, msg := range map[string]string{
		`{"tll": "30s"}`:          `unknown fields ["tll"]`,
		`{"ttl": "soon"}`:         `"ttl": "soon" is not a duration`,
		`{"tries": "many"}`:       `"tries"`,
		`["not", "an", "object"]`: "fxmodule: Config",
	} {
		err := json.Unmarshal([]byte(doc), &fromJSON)
		require.Error(t, err, doc)
		assert.ErrorContains(t, err, msg, doc)
	}
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

// Set parses a field from text as its variable would be, by the field's
// yaml name or a flag's spelling of it, and refuses unknown names and bad
// values.
func TestConfigSet(t *testing.T) {
	var c fxmodule.Config
	require.NoError(t, c.Set("addrs", " 10.0.0.1:6379,,10.0.0.2:6379 "))
	require.NoError(t, c.Set("node-timeout", "75ms"))
	require.NoError(t, c.Set("disable_restart_guard", "1"))
	require.NoError(t, c.Set("quorum", "2"))
	require.NoError(t, c.Set("driver", "redigo"))
	assert.Equal(t, fxmodule.Config{Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"}, NodeTimeout: 75 * time.Millisecond,
		DisableRestartGuard: true, Quorum: 2, Driver: "redigo"}, c)
	for _, bad := range [][2]string{{"ttl", "5"}, {"cluster", "yes"}, {"tries", "many"}, {"tls_config", "x"}, {"", "x"}, {"no-such", "1"}} {
		err := c.Set(bad[0], bad[1])
		assert.ErrorIs(t, err, core.ErrInvalidArgument, "%q", bad)
		assert.ErrorContains(t, err, bad[0])
	}
	assert.Equal(t, 75*time.Millisecond, c.NodeTimeout, "a bad value changes nothing")
}
