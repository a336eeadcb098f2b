package driver_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core/driver"
)

func TestEvalEach(t *testing.T) {
	n := memory.New()
	n.Set("mine", "v", 0)
	calls := []driver.Call{
		{SHA: driver.ScriptRelease.SHA(), Keys: []string{"mine"}, Args: []string{"v"}},
		{Source: driver.ScriptRelease.Source(), Keys: []string{"mine"}, Args: []string{"v"}},
		{Source: driver.ScriptExtend.Source(), Keys: []string{"other"}, Args: []string{"v", "1000"}},
	}
	driver.EvalEach(t.Context(), n, calls)
	require.ErrorIs(t, calls[0].Err, memory.ErrNoScript, "by SHA before the script is known")
	assert.Equal(t, int64(1), calls[1].Reply)
	assert.Equal(t, int64(0), calls[2].Reply)
	assert.Equal(t, memory.Calls{EvalSHA: 1, Eval: 2}, n.Calls())

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	driver.EvalEach(ctx, n, calls)
	for _, c := range calls {
		require.ErrorIs(t, c.Err, context.Canceled)
		assert.Nil(t, c.Reply)
	}
	assert.Equal(t, memory.Calls{EvalSHA: 1, Eval: 2}, n.Calls(), "nothing sent once ctx has ended")
}

func TestFailAll(t *testing.T) {
	calls := []driver.Call{{Reply: int64(1)}, {Err: errors.New("old")}}
	boom := errors.New("boom")
	driver.FailAll(calls, boom)
	for _, c := range calls {
		assert.Equal(t, boom, c.Err)
		assert.Nil(t, c.Reply)
	}
}

// CheckAddrs takes IPv6 addresses in brackets and named ports, trims
// spaces, and refuses anything that is not one "host:port" per server.
func TestCheckAddrs(t *testing.T) {
	got, err := driver.CheckAddrs("pkg", []string{" 10.0.0.1:6379", "[::1]:6379 ", "[fe80::1%eth0]:7000", "redis.internal:redis", "[::1]:65535"})
	require.NoError(t, err)
	assert.Equal(t, []string{"10.0.0.1:6379", "[::1]:6379", "[fe80::1%eth0]:7000", "redis.internal:redis", "[::1]:65535"}, got)

	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{nil, `pkg: Dial: no addresses: give one "host:port" per server`},
		{[]string{"[::1]:6379", "\t"}, `pkg: Dial: address 1 is empty ("\t")`},
		{[]string{"::1:6379"}, `pkg: Dial: address "::1:6379" is not host:port (too many colons in address): want "host:port", such as "10.0.0.1:6379"`},
		{[]string{"[::1]"}, `pkg: Dial: address "[::1]" has no port: want "host:port", such as "10.0.0.1:6379"`},
		{[]string{"[::1]:"}, `pkg: Dial: address "[::1]:" has no port: want "host:port", such as "10.0.0.1:6379"`},
		{[]string{"redis.internal"}, `pkg: Dial: address "redis.internal" has no port: want "host:port", such as "10.0.0.1:6379"`},
		{[]string{"[::1]:0"}, `pkg: Dial: address "[::1]:0" has port 0, outside 1-65535`},
		{[]string{"[::1]:65536"}, `pkg: Dial: address "[::1]:65536" has port 65536, outside 1-65535`},
		{[]string{"[::1]:6379", " [::1]:6379"}, `pkg: Dial: address "[::1]:6379" is given twice (addresses 0 and 1): one server would count twice`},
	} {
		got, err := driver.CheckAddrs("pkg", tc.addrs)
		require.ErrorIs(t, err, driver.ErrInvalidArgument, "%q", tc.addrs)
		assert.Equal(t, "quorumlock: invalid argument: "+tc.want, err.Error())
		assert.Nil(t, got)
	}
}

// TLSFor: off is plain TCP whatever the configuration given earlier; on
// is a clone of the configuration, or TLS 1.2 or later, named after the
// address's host unless the configuration names a server.
func TestTLSFor(t *testing.T) {
	cfg := &tls.Config{ServerName: "given"}
	assert.Nil(t, driver.TLSFor(cfg, false, "10.0.0.1:6379"), "WithTLSConfig then WithTLS(false)")
	assert.Nil(t, driver.TLSFor(nil, false, "10.0.0.1:6379"))
	got := driver.TLSFor(cfg, true, "10.0.0.1:6379")
	require.NotNil(t, got)
	assert.NotSame(t, cfg, got, "a clone per client")
	assert.Equal(t, "given", got.ServerName)
	got = driver.TLSFor(nil, true, "redis.internal:6379")
	require.NotNil(t, got)
	assert.Equal(t, "redis.internal", got.ServerName)
	assert.Equal(t, uint16(tls.VersionTLS12), got.MinVersion)
	caOnly := &tls.Config{MinVersion: tls.VersionTLS13}
	got = driver.TLSFor(caOnly, true, "redis-2.internal:6379")
	assert.Equal(t, "redis-2.internal", got.ServerName, "a configuration naming no server verifies each by its address")
	assert.Equal(t, uint16(tls.VersionTLS13), got.MinVersion)
	assert.Empty(t, caOnly.ServerName, "the caller's configuration is untouched")
}

func TestLuaReply(t *testing.T) {
	assert.Nil(t, driver.LuaReply(false), "Lua false is nil")
	assert.Equal(t, int64(1), driver.LuaReply(true), "Lua true is 1")
	assert.Equal(t, []any{int64(1), nil, "x", int64(7)}, driver.LuaReply([]any{true, false, "x", int64(7)}), "in arrays too")
	assert.Equal(t, "ok", driver.LuaReply("ok"))
}
