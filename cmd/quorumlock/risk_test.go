package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run stops COMMAND only when the library ends the lock: lost, or at risk
// after a failed extension (core.ErrLockAtRisk). Settings under which an
// extension cannot end before the lock is at risk are refused at start.
// (Issue 26, item 9.)
func TestRunAtRiskOnlyAfterFailure(t *testing.T) {
	t.Parallel()
	t.Run("a long keep-alive interval", func(t *testing.T) {
		t.Parallel()
		addrs := serverAddrs(t)
		// Validity falls to 0.78 s, under half the TTL, before each
		// extension; every extension succeeds. (1500ms is accepted too,
		// but leaves no time for a retry: on a loaded machine, one
		// extension that misses the node timeout ends the lock.)
		env := []string{"QUORUMLOCK_KEEP_ALIVE=1200ms"}
		r := runCLI(t, addrs, env, "run", "--ttl", "2s", "--node-timeout", "200ms", key(t), "--", "sleep", "3")
		assert.Equal(t, 0, r.code, r.stderr)
		assert.Empty(t, r.stderr)
	})
	t.Run("a keep-alive interval that leaves no room", func(t *testing.T) {
		t.Parallel()
		addrs := serverAddrs(t)
		env := []string{"QUORUMLOCK_KEEP_ALIVE=1600ms"}
		r := runCLI(t, addrs, env, "run", "--ttl", "2s", key(t), "--", "echo", "ran")
		assert.Equal(t, exitUsage, r.code, r.stderr)
		assert.Empty(t, r.stdout, "COMMAND must not run")
		assert.Contains(t, r.stderr, "keep-alive interval 1.6s must be less than TTL - drift - at-risk margin - node timeout = 1.528s")
		assert.Contains(t, r.stderr, "(QUORUMLOCK_KEEP_ALIVE, a fifth of --ttl, --node-timeout)", "the command's names, not the library's options")
		assert.NotContains(t, r.stderr, "fxmodule:")
	})
	t.Run("the maximum hold time", func(t *testing.T) {
		t.Parallel()
		addrs := serverAddrs(t)
		env := []string{"QUORUMLOCK_MAX_HOLD=1s"}
		r := runCLI(t, addrs, env, "run", "--ttl", "1s", key(t), "--", "sleep", "5")
		assert.Equal(t, exitLost, r.code, r.stderr)
		assert.Contains(t, r.stderr, "at risk: the keep-alive stopped at the maximum hold time (1s)")
		assert.NotContains(t, r.stderr, "<nil>")
		onePrefix(t, r.stderr)
	})
	t.Run("one hung server", func(t *testing.T) {
		t.Parallel()
		servers := ownServers(t, 3)
		run := startRun(t, addrsOf(servers), "run", "--ttl", "1s", "--node-timeout", "200ms", key(t), "--",
			"sh", "-c", `echo "ready $$"; sleep 3`)
		require.NoError(t, servers[0].Pause())
		defer func() { _ = servers[0].Resume() }()
		start := time.Now()
		r := finish(t, run.cmd, run.stdout, run.stderr)
		assert.Equal(t, 0, r.code, "the other two servers extend the lock: %s", r.stderr)
		assert.Greater(t, time.Since(start), 2*time.Second, "COMMAND ran to its end")
	})
}
