package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// COMMAND's background processes hold the lock as COMMAND does: run
// releases it once the last process of COMMAND's group has ended, and
// keeps it alive meanwhile, past the TTL.
func TestRunWaitsForGroup(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k, dir := key(t), t.TempDir()
	env := []string{"DIR=" + dir}
	first, out := startBuffered(t, addrs, env, "run", "--ttl", "2s", k, "--", "sh", "-c",
		`(touch "$DIR/started"; sleep 2.5; touch "$DIR/ended") & exit 0`)
	awaitFile(t, filepath.Join(dir, "started"))
	second := runCLI(t, addrs, env, "run", "--wait", "10s", k, "--", "sh", "-c",
		`[ -e "$DIR/ended" ] && echo after || echo overlap`)
	assert.Equal(t, 0, second.code, second.stderr)
	assert.Equal(t, "after\n", second.stdout, "the second run ran beside the first's background step")
	r := finish(t, first, &out[0], &out[1])
	assert.Equal(t, 0, r.code, "COMMAND's status, its shell's: %s", r.stderr)
}

// A lost lock stops what is left of COMMAND's group after COMMAND itself
// has exited, as it stops COMMAND: SIGKILL for a background process that
// ignores SIGTERM, within the validity; run exits 79.
func TestRunLockLostStopsGroup(t *testing.T) {
	t.Parallel()
	servers := ownServers(t, 3)
	const ttl = 2 * time.Second
	// readyLoop's $$ is the shell's, COMMAND's, in the subshell too.
	run := startRun(t, addrsOf(servers), "run", "--ttl", ttl.String(), key(t), "--", "sh", "-c",
		`(trap '' TERM; `+readyLoop+`) & exit 0`)
	stopped := time.Now()
	require.NoError(t, servers[0].Stop())
	require.NoError(t, servers[1].Pause())
	defer func() { _ = servers[1].Resume() }()
	run.stderr.await(t, "quorumlock: COMMAND ended", 10*time.Second)
	ended := time.Now()
	r := finish(t, run.cmd, run.stdout, run.stderr)
	assert.Equal(t, exitLost, r.code, r.stderr)
	assert.Less(t, ended.Sub(stopped), ttl, "COMMAND's group outlived the lock's validity")
	run.requireGone(t)
}

// startBuffered starts quorumlock with args, its stdout and stderr in the
// buffers it returns (read them after finish).
func startBuffered(t *testing.T, addrs, env []string, args ...string) (*exec.Cmd, *[2]bytes.Buffer) {
	t.Helper()
	cmd := quorumlock(t, addrs, env, args...)
	out := new([2]bytes.Buffer)
	cmd.Stdout, cmd.Stderr = &out[0], &out[1]
	require.NoError(t, cmd.Start())
	return cmd, out
}

// awaitFile waits for path to exist, within ten seconds.
func awaitFile(t *testing.T, path string) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil },
		10*time.Second, 10*time.Millisecond, "no file %s", path)
}
