package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core/driver"
)

// logged is a shell COMMAND that appends "start ID" to log, says it is
// ready, and on SIGTERM appends "end ID" and exits 0.
func logged(log, id string) string {
	return fmt.Sprintf(`trap 'echo "end %[2]s" >> '%[1]s'; exit 0' TERM; echo "start %[2]s" >> '%[1]s'; %[3]s`,
		log, id, readyLoop)
}

// patient is a command line with a node timeout that a busy machine
// meets: these tests are about the lock kinds, not about slow servers.
func patient(command string, args ...string) []string {
	return append([]string{command, "--node-timeout", "1s"}, args...)
}

func readLog(t *testing.T, log string) []string {
	t.Helper()
	out, err := os.ReadFile(log)
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// assertSerial checks that the runs' "start ID" and "end ID" lines come
// in pairs, one run after another, and that each of runs ran once.
func assertSerial(t *testing.T, lines []string, runs int) {
	t.Helper()
	require.Len(t, lines, 2*runs, "every run ran, once: %q", lines)
	for i := 0; i < len(lines); i += 2 {
		id := strings.TrimPrefix(lines[i], "start ")
		assert.Equal(t, []string{"start " + id, "end " + id}, lines[i:i+2], "runs overlapped: %q", lines)
	}
}

// Two --shared runs hold one key at once; an exclusive run exits 75
// without --wait, and with --wait runs once both have ended. While it
// waits, new --shared runs are refused: a writer is not starved.
func TestRunShared(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k := key(t)
	log := filepath.Join(t.TempDir(), "log")
	// Neither waits: the second is in only if the first lets it in.
	a := startRun(t, addrs, patient("run", "--shared", k, "--", "sh", "-c", logged(log, "a"))...)
	b := startRun(t, addrs, patient("run", "--shared", k, "--", "sh", "-c", logged(log, "b"))...)

	writer := quorumlock(t, addrs, nil, patient("run", "--wait", "30s", k, "--", "sh", "-c", `echo writer >> '`+log+`'`)...)
	var wout, werr bytes.Buffer
	writer.Stdout, writer.Stderr = &wout, &werr
	require.NoError(t, writer.Start())
	// The writer has lost a round to the readers once every node carries
	// its mark (a writer waits).
	mark, ok := driver.WriterKey(k)
	require.True(t, ok)
	require.Eventually(t, func() bool { return marked(t, addrs, mark) == len(addrs) },
		10*time.Second, 5*time.Millisecond, "the waiting writer's mark")

	r := runCLI(t, addrs, nil, patient("run", k, "--", "sh", "-c", `echo writer >> '`+log+`'`)...)
	assert.Equal(t, exitConflict, r.code, r.stderr)
	assert.Contains(t, r.stderr, `lock "`+k+`" is held elsewhere`)
	r = runCLI(t, addrs, nil, patient("run", "--shared", k, "--", "echo", "ran")...)
	assert.Equal(t, exitConflict, r.code, "a writer waits: no new reader: %s", r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, `read lock "`+k+`" is refused: a writer holds the key elsewhere, or waits for it`)
	onePrefix(t, r.stderr)

	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, finish(t, a.cmd, a.stdout, a.stderr).code)
	assert.Equal(t, []string{"start a", "start b", "end a"}, readLog(t, log), "b still reads: no writer")
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, finish(t, b.cmd, b.stdout, b.stderr).code)
	w := finish(t, writer, &wout, &werr)
	assert.Equal(t, 0, w.code, w.stderr)
	assert.Equal(t, []string{"start a", "start b", "end a", "end b", "writer"}, readLog(t, log))
}

// marked counts the servers that hold key.
func marked(t *testing.T, addrs []string, key string) int {
	n := 0
	for _, a := range addrs {
		if c, err := redistest.AdminClient(t, a).Exists(t.Context(), key).Result(); err == nil {
			n += int(c)
		}
	}
	return n
}

// run KEY KEY... -- COMMAND holds every key or none: a set overlapping
// it is refused and leaves nothing behind, a disjoint set runs beside it,
// and COMMAND finds the keys, sorted, in QUORUMLOCK_KEY.
func TestRunKeys(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k := func(s string) string { return key(t) + ":" + s }
	held := startRun(t, addrs, patient("run", k("b"), k("a"), "--", "sh", "-c", `echo "key $QUORUMLOCK_KEY"; `+readyLoop)...)
	assert.Contains(t, held.stdout.String(), "key "+k("a")+","+k("b")+"\n")
	for _, s := range []string{"a", "b"} {
		r := runCLI(t, addrs, nil, patient("status", k(s))...)
		assert.Equal(t, exitOK, r.code, "%s held: %s", s, r.stdout)
	}

	r := runCLI(t, addrs, nil, patient("run", k("b"), k("c"), "--", "echo", "ran")...)
	assert.Equal(t, exitConflict, r.code, r.stderr)
	assert.Empty(t, r.stdout, "COMMAND must not run")
	assert.Contains(t, r.stderr, fmt.Sprintf("locks %q, %q: one or more is held elsewhere", k("b"), k("c")))
	onePrefix(t, r.stderr)
	r = runCLI(t, addrs, nil, patient("status", k("c"))...)
	assert.Equal(t, exitFree, r.code, "no partial grant left: %s", r.stdout)
	assert.Equal(t, k("c")+": free\n", strings.SplitAfter(r.stdout, "\n")[0])
	r = runCLI(t, addrs, nil, patient("run", k("a"), "--", "echo", "ran")...)
	assert.Equal(t, exitConflict, r.code, "a plain run of one of the keys: %s", r.stderr)

	r = runCLI(t, addrs, nil, patient("run", k("c"), k("d"), "--", "echo", "ran")...)
	assert.Equal(t, 0, r.code, "a disjoint set runs beside it: %s", r.stderr)
	assert.Equal(t, "ran\n", r.stdout)

	require.NoError(t, held.cmd.Process.Signal(syscall.SIGTERM))
	finish(t, held.cmd, held.stdout, held.stderr)
	locker := testLocker(t, addrs)
	assert.False(t, heldNow(t, locker, k("a")), "released")
	assert.False(t, heldNow(t, locker, k("b")), "released")
}

// run a b and run c b (sorted: b c) never overlap: with --wait, every run
// runs, one holder of b at a time.
func TestRunKeysNoOverlap(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	dir := t.TempDir()
	log, held := filepath.Join(dir, "log"), filepath.Join(dir, "held")
	script := `[ -e "$HELD" ] && echo "overlap $ID" >> "$LOG"
touch "$HELD"; echo "start $ID" >> "$LOG"
sleep 0.2
echo "end $ID" >> "$LOG"; rm "$HELD"`
	k := func(s string) string { return key(t) + ":" + s }
	sets := [][]string{{k("a"), k("b")}, {k("c"), k("b")}, {k("a"), k("b")}, {k("c"), k("b")}}
	results := make([]result, len(sets))
	var wg sync.WaitGroup
	for i, set := range sets {
		wg.Go(func() {
			env := []string{"ID=" + string(rune('a'+i)), "LOG=" + log, "HELD=" + held}
			args := patient("run", append(append([]string{"--wait", "30s"}, set...), "--", "sh", "-c", script)...)
			results[i] = runCLI(t, addrs, env, args...)
		})
	}
	wg.Wait()
	for i, r := range results {
		assert.Equal(t, 0, r.code, "run %d: %s", i, r.stderr)
	}
	assertSerial(t, readLog(t, log), len(sets))
}

// status lists the readers of a shared lock, each with how many nodes list
// it and for how long it holds, their values only with --value; a reader
// on fewer than a quorum of nodes is listed as such.
func TestStatusReaders(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k := key(t)
	locker := testLocker(t, addrs)
	r1, err := locker.AcquireShared(t.Context(), k)
	require.NoError(t, err)
	r2, err := locker.AcquireShared(t.Context(), k)
	require.NoError(t, err)
	readers, ok := driver.ReadersKey(k)
	require.True(t, ok)
	expiry := time.Now().Add(time.Hour).UnixMilli()
	require.NoError(t, redistest.AdminClient(t, addrs[0]).Do(t.Context(), "ZADD", readers, expiry, "stray").Err())

	r := runCLI(t, addrs, nil, patient("status", k)...)
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `^`+k+`: held by 2 readers on 3 of 3 nodes \(quorum 2\), [0-9.]+s left\n`, r.stdout)
	assert.Regexp(t, `(?m)^  127\.0\.0\.1:\d+ +shared +[0-9.]+s +3 readers$`, r.stdout)
	assert.Regexp(t, `(?m)^  readers:\n    reader 1 +on 3 of 3 nodes +[0-9.]+s left\n    reader 2 +on 3 of 3 nodes +[0-9.]+s left\n`+
		`    reader 3 +on 1 of 3 nodes, not a quorum +59m[0-9.]+s left$`, r.stdout)
	for _, v := range []string{r1.Value(), r2.Value(), "stray"} {
		assert.NotContains(t, r.stdout, v, "a reader's value is a secret")
	}

	r = runCLI(t, addrs, nil, patient("status", "--value", k)...)
	assert.Equal(t, exitOK, r.code, r.stderr)
	for _, v := range []string{r1.Value(), r2.Value(), "stray"} {
		assert.Regexp(t, `(?m)^    `+v+` +on [13] of 3 nodes`, r.stdout)
	}
	require.NoError(t, r2.Release(t.Context()))
	r = runCLI(t, addrs, nil, patient("status", k)...)
	assert.Regexp(t, `^`+k+`: held by 1 reader on 3 of 3 nodes`, r.stdout)
	assert.Regexp(t, `(?m)^  127\.0\.0\.1:\d+ +shared +[0-9.]+s +1 reader$`, r.stdout)
	require.NoError(t, r1.Release(t.Context()))
}
