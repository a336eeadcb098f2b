package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
)

// leading is a COMMAND for elect that notes its term, then logs "start
// ID", says "ready", and on SIGTERM logs "end ID" and exits 0.
func leading(dir, id string) string {
	return fmt.Sprintf(`trap 'echo "end %[2]s" >> '%[1]s/log'; exit 0' TERM
echo "%[2]s $QUORUMLOCK_TERM" >> '%[1]s/terms'; echo "start %[2]s" >> '%[1]s/log'; %[3]s`, dir, id, readyLoop)
}

// starts returns the IDs of the "start" lines of dir's log so far.
func starts(dir string) []string {
	out, _ := os.ReadFile(filepath.Join(dir, "log"))
	var ids []string
	for line := range strings.Lines(string(out)) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "start "); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// Three elect processes on one key: one leads. Its quorumlock killed by
// SIGKILL, another leads once the killed term has expired, within about a
// TTL; the next resigns on SIGTERM and the third leads at once. One leads
// at a time, and each term is greater than the one before.
func TestElectFailover(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k := key(t)
	dir := t.TempDir()
	const ttl = 3 * time.Second
	procs := map[string]*running{}
	for _, id := range []string{"a", "b", "c"} {
		cmd := quorumlock(t, addrs, nil, patient("elect", "--ttl", ttl.String(), "--value", id, k, "--", "sh", "-c", leading(dir, id))...)
		require.NoError(t, cmd.Start())
		procs[id] = &running{cmd: cmd}
	}
	awaitStarts := func(n int) string {
		t.Helper()
		require.Eventually(t, func() bool { return len(starts(dir)) >= n }, 30*time.Second, 5*time.Millisecond, "leader %d", n)
		ids := starts(dir)
		require.Len(t, ids, n, "one leader at a time: %q", ids)
		return ids[n-1]
	}
	first := awaitStarts(1)
	require.NoError(t, procs[first].cmd.Process.Kill())
	killed := time.Now()
	second := awaitStarts(2)
	took := time.Since(killed)
	assert.Greater(t, took, ttl/2, "led before the killed leader's term could have expired")
	assert.Less(t, took, ttl+1500*time.Millisecond, "not led within about a TTL of the kill")
	t.Logf("SIGKILL to the leader: the next led %v later (TTL %v)", took.Round(time.Millisecond), ttl)

	r := runCLI(t, addrs, nil, patient("status", k)...)
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `^`+k+`: led by `+second+` \(term \d+\) on [23] of 3 nodes`, r.stdout)

	require.NoError(t, procs[second].cmd.Process.Signal(syscall.SIGTERM))
	third := awaitStarts(3)
	require.NoError(t, procs[third].cmd.Process.Signal(syscall.SIGTERM))
	for _, id := range []string{second, third} {
		p := procs[id]
		assert.Equal(t, 0, finish(t, p.cmd, &strings.Builder{}, &strings.Builder{}).code, "leader %s resigned", id)
	}
	assertSerial(t, readLog(t, filepath.Join(dir, "log"))[1:], 2)
	terms := readLog(t, filepath.Join(dir, "terms"))
	require.Len(t, terms, 3)
	last := 0
	for _, line := range terms {
		term := atoi(t, strings.Fields(line)[1])
		assert.Greater(t, term, last, "terms grow: %q", terms)
		last = term
	}
	r = runCLI(t, addrs, nil, patient("status", k)...)
	assert.Equal(t, exitFree, r.code, "the last resigned: %s", r.stdout)
}

// status on an election's key names the leader (HOST:PID by default) and
// its term, which COMMAND finds in QUORUMLOCK_TERM and QUORUMLOCK_TOKEN.
func TestStatusLeader(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k := key(t)
	run := startRun(t, addrs, patient("elect", k, "--", "sh", "-c", `echo "term $QUORUMLOCK_TERM $QUORUMLOCK_TOKEN"; `+readyLoop)...)
	fields := strings.Fields(run.stdout.String())
	require.GreaterOrEqual(t, len(fields), 3, "%q", run.stdout.String())
	term := fields[1]
	assert.Equal(t, term, fields[2], "the token is the term")
	host, err := os.Hostname()
	require.NoError(t, err)

	r := runCLI(t, addrs, nil, patient("status", k)...)
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, fmt.Sprintf(`^%s: led by %s:%d \(term %s\) on [23] of 3 nodes \(quorum 2\), `,
		regexp.QuoteMeta(k), regexp.QuoteMeta(host), run.cmd.Process.Pid, term), r.stdout)

	require.NoError(t, run.cmd.Process.Signal(syscall.SIGTERM))
	finish(t, run.cmd, run.stdout, run.stderr)
	r = runCLI(t, addrs, nil, patient("status", k)...)
	assert.Equal(t, exitFree, r.code, "resigned: %s", r.stdout)
	assert.Equal(t, k+": free\n", strings.SplitAfter(r.stdout, "\n")[0])
}

// elect --again stands again after COMMAND exits, and after a lost
// leadership, each time with a greater term, until a signal.
func TestElectAgain(t *testing.T) {
	t.Parallel()
	t.Run("exited", func(t *testing.T) {
		t.Parallel()
		addrs := serverAddrs(t)
		run := quorumlock(t, addrs, nil, patient("elect", "--again", key(t), "--", "sh", "-c", `echo "term $QUORUMLOCK_TERM"`)...)
		out, err := run.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		run.Stderr = &stderr
		require.NoError(t, run.Start())
		lines := readLines(t, out)
		last := 0
		for range 3 {
			term := atoi(t, strings.TrimPrefix(lines.await(t, "term ", 30*time.Second), "term "))
			assert.Greater(t, term, last, "a new term")
			last = term
		}
		require.NoError(t, run.Process.Signal(syscall.SIGTERM))
		r := finish(t, run, lines, &stderr)
		assert.Contains(t, []int{0, 128 + int(syscall.SIGTERM)}, r.code, "COMMAND's status, or the signal's between terms: %s", r.stderr)
		assert.False(t, heldNow(t, testLocker(t, addrs), key(t)), "resigned")
	})
	t.Run("interrupted", func(t *testing.T) {
		// Ctrl-C in a terminal reaches COMMAND's group alone: a COMMAND
		// ended by SIGINT ends elect --again, as it ends a shell's loop.
		// QUORUMLOCK_WAIT is run's: a bad one is no fault of elect's.
		t.Parallel()
		addrs := serverAddrs(t)
		run := quorumlock(t, addrs, []string{"QUORUMLOCK_WAIT=soon"}, patient("elect", "--again", key(t), "--", "sh", "-c", `echo "term $QUORUMLOCK_TERM"; kill -INT $$`)...)
		out, err := run.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		run.Stderr = &stderr
		require.NoError(t, run.Start())
		r := finish(t, run, readLines(t, out), &stderr)
		assert.Equal(t, 128+int(syscall.SIGINT), r.code, "COMMAND's status, and no second term: %s", r.stderr)
		assert.Equal(t, 1, strings.Count(r.stdout, "term "), "one term")
	})
	t.Run("lost", func(t *testing.T) {
		t.Parallel()
		addrs := serverAddrs(t)
		k := key(t)
		run := startRun(t, addrs, patient("elect", "--again", "--ttl", "3s", k, "--", "sh", "-c",
			`trap 'exit 0' TERM; echo "term $QUORUMLOCK_TERM"; `+readyLoop)...)
		first := atoi(t, strings.TrimPrefix(strings.SplitN(run.stdout.String(), "\n", 2)[0], "term "))
		for _, a := range addrs[:2] {
			require.NoError(t, redistest.AdminClient(t, a).Del(t.Context(), k).Err())
		}
		run.stderr.await(t, "quorumlock: COMMAND ended", 30*time.Second)
		next := atoi(t, strings.TrimPrefix(run.stdout.await(t, "term ", 30*time.Second), "term "))
		assert.Greater(t, next, first, "a new term")
		run.stdout.await(t, "ready ", 30*time.Second)
		require.NoError(t, run.cmd.Process.Signal(syscall.SIGTERM))
		r := finish(t, run.cmd, run.stdout, run.stderr)
		assert.Equal(t, 0, r.code, "COMMAND's status: %s", r.stderr)
		assert.Contains(t, r.stderr, `lock "`+k+`" lost`)
		assert.Contains(t, r.stderr, "standing again")
		onePrefix(t, r.stderr)
		assert.False(t, heldNow(t, testLocker(t, addrs), k), "resigned")
	})
}
