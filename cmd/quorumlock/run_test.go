package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
)

// Two runs on one key never overlap: with --wait, the second runs after
// the first, and their outputs to one file never interleave.
func TestRunNoOverlap(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	dir := t.TempDir()
	log, held := filepath.Join(dir, "log"), filepath.Join(dir, "held")
	// Each run marks the lock held in a file, and reports a run that
	// finds the mark already there.
	script := `[ -e "$HELD" ] && echo "overlap $ID" >> "$LOG"
touch "$HELD"; echo "start $ID" >> "$LOG"
sleep 0.3
echo "end $ID" >> "$LOG"; rm "$HELD"`
	const runs = 3
	results := make([]result, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			env := []string{"ID=" + string(rune('a'+i)), "LOG=" + log, "HELD=" + held}
			results[i] = runCLI(t, addrs, env, "run", "--wait", "30s", key(t), "--", "sh", "-c", script)
		})
	}
	wg.Wait()
	for i, r := range results {
		assert.Equal(t, 0, r.code, "run %d: %s", i, r.stderr)
	}
	assertSerial(t, readLog(t, log), runs)
}

// --wait 0 (the default) exits 75 at once while the key is held, without
// running COMMAND; --conflict-exit-code and --quiet change the status and
// the message.
func TestRunConflict(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k := key(t)
	holder := testLocker(t, addrs)
	lock, err := holder.Acquire(t.Context(), k) // held for a minute: TTL
	require.NoError(t, err)

	r := runCLI(t, addrs, nil, "run", k, "--", "echo", "ran")
	assert.Equal(t, exitConflict, r.code)
	assert.Empty(t, r.stdout, "COMMAND must not run")
	assert.Contains(t, r.stderr, `lock "`+k+`" is held elsewhere`)
	onePrefix(t, r.stderr)
	r = runCLI(t, addrs, nil, "run", "--wait", "300ms", k, "--", "echo", "ran")
	assert.Equal(t, exitConflict, r.code)
	assert.Empty(t, r.stdout, "COMMAND must not run")
	assert.Contains(t, r.stderr, `lock "`+k+`" is still held elsewhere after waiting 300ms`)

	r = runCLI(t, addrs, nil, "run", "--wait", "0", "--conflict-exit-code", "3", "--quiet", k, "--", "echo", "ran")
	assert.Equal(t, 3, r.code)
	assert.Empty(t, r.stdout+r.stderr, "--quiet: nothing said about a conflict")

	r = runCLI(t, addrs, []string{"QUORUMLOCK_CONFLICT_EXIT_CODE=0"}, "run", k, "--", "echo", "ran")
	assert.Equal(t, 0, r.code, "the variable is read too")
	assert.Empty(t, r.stdout)

	assert.True(t, heldNow(t, holder, k), "the holder's lock was never touched")
	require.NoError(t, lock.Release(t.Context()))
	r = runCLI(t, addrs, nil, "run", k, "--", "echo", "ran")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "ran\n", r.stdout)
}

// COMMAND's exit status comes through, 128+N when a signal killed it, and
// 126 or 127 when it cannot be run; the lock is released after each, and
// COMMAND finds the key and, with --fencing, a token that grows.
func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k := key(t)
	for _, c := range []struct {
		command []string
		want    int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"sh", "-c", "kill -9 $$"}, 128 + 9},
		{[]string{"quorumlock-test-no-such-command"}, exitNotFound},
		{[]string{t.TempDir()}, exitCannotRun},
	} {
		r := runCLI(t, addrs, nil, append([]string{"run", k, "--"}, c.command...)...)
		assert.Equal(t, c.want, r.code, "%q: %s", c.command, r.stderr)
	}
	assert.False(t, heldNow(t, testLocker(t, addrs), k), "released after every run")

	r := runCLI(t, addrs, nil, "run", "--fencing", k, "--", "sh", "-c", `echo "$QUORUMLOCK_KEY $QUORUMLOCK_TOKEN"`)
	require.Equal(t, 0, r.code, r.stderr)
	first := strings.Fields(r.stdout)
	require.Len(t, first, 2, "%q", r.stdout)
	assert.Equal(t, k, first[0])
	r = runCLI(t, addrs, []string{"QUORUMLOCK_FENCING=true"}, "run", k, "sh", "-c", `echo "$QUORUMLOCK_TOKEN"`)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Greater(t, atoi(t, r.stdout), atoi(t, first[1]), "each holder's token is larger")
	r = runCLI(t, addrs, []string{"QUORUMLOCK_TOKEN=7"}, "run", k, "--", "sh", "-c", `echo "[$QUORUMLOCK_TOKEN]"`)
	assert.Equal(t, "[]\n", r.stdout, "without --fencing no token, not even an inherited one")
}

// COMMAND is everything after KEY when no "--" follows, or after the
// first "--" after the keys, even a "--" of its own.
func TestRunCommandLine(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	for _, args := range [][]string{
		{"run", key(t), "sh", "-c", `echo "$@"`, "_", "a", "b"},
		{"run", key(t), "--", "sh", "-c", `echo "$@"`, "--", "a", "b"},
		{"run", "--", key(t), "--", "sh", "-c", `echo "$@"`, "--", "a", "b"},
		{"run", key(t) + ":1", key(t) + ":2", "--", "sh", "-c", `echo "$@"`, "--", "a", "b"},
	} {
		r := runCLI(t, addrs, nil, args...)
		assert.Equal(t, 0, r.code, "%q: %s", args, r.stderr)
		assert.Equal(t, "a b\n", r.stdout, "%q", args)
	}
}

// Servers younger than the TTL do not vote (the restart guard): run exits
// with the conflict status, says how to adopt new servers, and says
// nothing with --quiet.
func TestRunRestartGuard(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t, redistest.WithFresh(true))
	env := []string{"QUORUMLOCK_TTL=1m"} // the guard's wait: the TTL
	r := runCLI(t, addrs, env, "run", key(t), "--", "echo", "ran")
	assert.Equal(t, exitConflict, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "SET quorumlock:birth 0")
	onePrefix(t, r.stderr)
	r = runCLI(t, addrs, env, "run", "--quiet", key(t), "--", "echo", "ran")
	assert.Equal(t, exitConflict, r.code, r.stderr)
	assert.Empty(t, r.stdout+r.stderr)
}

// In the foreground of a terminal, COMMAND takes the terminal as a shell's
// job would: in a background process group, reading it would stop COMMAND
// (SIGTTIN) for ever, with the lock held.
func TestRunTerminal(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	script, err := exec.LookPath("script")
	require.NoError(t, err, "script(1), of util-linux, gives the test a terminal")
	line := os.Args[0] + " run " + key(t) + ` -- sh -c 'read answer; echo "got $answer"'`
	cmd := exec.Command(script, "-qec", line, "/dev/null")
	cmd.Env = append(os.Environ(), asCLI+"=1", "QUORUMLOCK_ADDRS="+strings.Join(addrs, ","))
	cmd.Stdin = strings.NewReader("yes\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	r := finish(t, cmd, &stdout, &stderr)
	assert.Equal(t, 0, r.code, "stdout: %q stderr: %q", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "got yes")
}

// SIGTERM or SIGINT to quorumlock reach COMMAND; quorumlock releases the
// lock once COMMAND has exited, and exits with COMMAND's status.
func TestRunSignals(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			k := key(t)
			run := startRun(t, addrs, "run", "--ttl", "1m", k, "--", "sh", "-c",
				`trap 'echo "stopping $$"; exit 7' TERM INT; `+readyLoop)
			require.NoError(t, run.cmd.Process.Signal(sig))
			r := finish(t, run.cmd, run.stdout, run.stderr)
			assert.Equal(t, 7, r.code, "COMMAND's status: %s", r.stderr)
			assert.Contains(t, r.stdout, "stopping", "COMMAND got the signal")
			run.requireGone(t)
			assert.False(t, heldNow(t, testLocker(t, addrs), k), "released at once, not after the TTL (1m)")
		})
	}
}

// A lock lost mid-command (a majority of servers stopped) stops COMMAND
// within the lock's validity, by SIGTERM or, for a COMMAND that ignores
// it, by SIGKILL; quorumlock says why and exits 79.
func TestRunLockLost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, trap string }{
		{"term", `trap 'echo "stopping"; exit 0' TERM`},
		{"kill", `trap '' TERM`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			servers := ownServers(t, 3)
			const ttl = 3 * time.Second
			run := startRun(t, addrsOf(servers), "run", "--ttl", ttl.String(), key(t), "--", "sh", "-c", c.trap+"; "+readyLoop)
			// The lock's validity ends before its last extension's start
			// plus the TTL; that extension started before this.
			stopped := time.Now()
			require.NoError(t, servers[0].Stop())
			require.NoError(t, servers[1].Pause())
			defer func() { _ = servers[1].Resume() }()
			// quorumlock says so once COMMAND has exited.
			run.stderr.await(t, "quorumlock: COMMAND ended", 30*time.Second)
			ended := time.Now()
			r := finish(t, run.cmd, run.stdout, run.stderr)
			assert.Equal(t, exitLost, r.code, r.stderr)
			assert.Regexp(t, `lock ".*" (at risk|lost).*stopping COMMAND`, r.stderr)
			onePrefix(t, r.stderr)
			assert.Less(t, ended.Sub(stopped), ttl, "COMMAND outlived the lock's validity")
			run.requireGone(t)
		})
	}
}

// A lock taken over (its key deleted on a majority, as a failover or an
// operator would) is lost at the next extension: COMMAND is killed at once,
// there being no validity left to wait for, and run exits 79.
func TestRunLockTakenOver(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k := key(t)
	run := startRun(t, addrs, "run", "--ttl", "3s", k, "--", "sh", "-c", readyLoop)
	for _, a := range addrs[:2] {
		require.NoError(t, redistest.AdminClient(t, a).Del(t.Context(), k).Err())
	}
	run.stderr.await(t, "quorumlock: COMMAND ended", 30*time.Second)
	r := finish(t, run.cmd, run.stdout, run.stderr)
	assert.Equal(t, exitLost, r.code, r.stderr)
	assert.Contains(t, r.stderr, `lock "`+k+`" lost`)
	assert.Contains(t, r.stderr, "SIGKILL in 0s")
	assert.NotContains(t, r.stderr, "lost: lock lost", "lost, said once")
	onePrefix(t, r.stderr)
	run.requireGone(t)
}

// Over one Redis Cluster (--cluster: one node), with each driver that has
// a cluster client, run takes and releases the lock and status sees it.
func TestRunCluster(t *testing.T) {
	t.Parallel()
	redistest.RequireServer(t)
	c, err := redistest.StartCluster(t.Context(), redistest.ClusterMasters)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	// A first call to a cluster (its topology too) can miss 50 ms on a busy
	// machine; this test is not about slow servers.
	env := []string{"QUORUMLOCK_NODE_TIMEOUT=1s"}
	for _, d := range []string{"goredis", "rueidis", "valkey"} {
		k := key(t) + ":" + d
		r := runCLI(t, c.Addrs(), env, "run", "--cluster", "--driver", d, k, "--", "sh", "-c",
			os.Args[0]+` status --cluster --driver `+d+` "$QUORUMLOCK_KEY"`)
		assert.Equal(t, 0, r.code, "%s: %s", d, r.stderr)
		assert.Regexp(t, `held on 1 of 1 nodes \(quorum 1\)`, r.stdout, d)
		r = runCLI(t, c.Addrs(), env, "status", "--cluster", "--driver", d, k)
		assert.Equal(t, exitFree, r.code, "%s: released: %s", d, r.stderr)
	}
	// Several keys must share a slot there: refused before any node is asked.
	r := runCLI(t, c.Addrs(), env, "run", "--cluster", key(t)+":a", key(t)+":b", "--", "echo", "ran")
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "one hash tag")
	assert.Empty(t, r.stdout)
	r = runCLI(t, c.Addrs(), env, "run", "--cluster", "{"+key(t)+"}:a", "{"+key(t)+"}:b", "--", "echo", "ran")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "ran\n", r.stdout)
}
