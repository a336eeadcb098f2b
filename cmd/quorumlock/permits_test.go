package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inside counts the files "in.*" of dir: the runs inside.
func inside(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "in.") {
			n++
		}
	}
	return n
}

// Five `run -n 2 --wait` at once: two are inside together, never three.
// The first two wait at a gate the test opens once status has shown both
// permits in use and a sixth run without --wait has exited 75; the rest
// then come and go, each counting those inside as it enters.
func TestRunPermits(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k := key(t)
	dir := t.TempDir()
	gate, counts := filepath.Join(dir, "gate"), filepath.Join(dir, "counts")
	script := `touch "$DIR/in.$ID"
echo "$(ls "$DIR" | grep -c '^in\.')" >> "$COUNTS"
while [ ! -e "$GATE" ]; do sleep 0.01; done
sleep 0.1
rm "$DIR/in.$ID"`
	const runs = 5
	results := make([]result, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			env := []string{"ID=" + strconv.Itoa(i), "DIR=" + dir, "GATE=" + gate, "COUNTS=" + counts}
			results[i] = runCLI(t, addrs, env, patient("run", "-n", "2", "--wait", "1m", k, "--", "sh", "-c", script)...)
		})
	}
	defer wg.Wait()
	defer func() { _ = os.WriteFile(gate, nil, 0o600) }() // however the test ends
	require.Eventually(t, func() bool { return inside(t, dir) == 2 }, 30*time.Second, 10*time.Millisecond, "two runs inside")

	r := runCLI(t, addrs, nil, patient("status", "-n", "2", k)...)
	assert.Equal(t, exitOK, r.code, "every permit in use: %s", r.stderr)
	assert.Regexp(t, `^`+k+`: 2 of 2 permits in use\n`, r.stdout)
	assert.Regexp(t, `(?m)^  \{`+k+`\}:permit:0: held on [23] of 3 nodes \(quorum 2\), [0-9.]+s left\n    127\.0\.0\.1:\d+ +(held|free)`, r.stdout)
	assert.Regexp(t, `(?m)^  \{`+k+`\}:permit:1: held on [23] of 3 nodes`, r.stdout)
	r = runCLI(t, addrs, nil, patient("run", "-n", "2", k, "--", "echo", "ran")...)
	assert.Equal(t, exitConflict, r.code, r.stderr)
	assert.Empty(t, r.stdout, "COMMAND must not run")
	assert.Contains(t, r.stderr, `semaphore "`+k+`" (2 permits): every permit is held elsewhere`)
	onePrefix(t, r.stderr)

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	wg.Wait()
	for i, r := range results {
		assert.Equal(t, 0, r.code, "run %d: %s", i, r.stderr)
	}
	seen := readLog(t, counts)
	require.Len(t, seen, runs, "every run ran, once")
	for _, n := range seen {
		assert.LessOrEqual(t, atoi(t, n), 2, "more than two inside: %q", seen)
	}
	r = runCLI(t, addrs, nil, patient("status", "-n", "2", k)...)
	assert.Equal(t, exitFree, r.code, "all released: %s", r.stdout)
	assert.Regexp(t, `^`+k+`: 0 of 2 permits in use\n`, r.stdout)
}
