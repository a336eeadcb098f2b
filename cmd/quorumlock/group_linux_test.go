package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// quorumlock adopts COMMAND's orphans (a child subreaper): a process
// double-forked out of COMMAND, whose parent exits at once, becomes
// quorumlock's child, holds the lock while it runs, and is reaped (a dead
// process left unreaped would hold it for ever).
func TestRunAdoptsOrphans(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k, dir := key(t), t.TempDir()
	env := []string{"DIR=" + dir}
	// The step waits until its parent is out of its group (the subshell
	// has exited, the step adopted), says who adopted it, and runs on.
	step := `i=0; while [ $i -lt 500 ]; do
	read -r _ _ _ pp pg _ < /proc/$$/stat
	ppg=$( { read -r _ _ _ _ g _ < /proc/$pp/stat && echo $g; } 2>/dev/null)
	[ -n "$ppg" ] && [ "$ppg" != "$pg" ] && break
	i=$((i+1)); sleep 0.01
done
echo $pp > "$DIR/parent.tmp"; mv "$DIR/parent.tmp" "$DIR/parent"
sleep 1; touch "$DIR/ended"`
	first, out := startBuffered(t, addrs, append(env, "STEP="+step), "run", k, "--", "sh", "-c",
		`(sh -c "$STEP" &); exit 0`)
	awaitFile(t, filepath.Join(dir, "parent"))
	second := runCLI(t, addrs, env, "run", "--wait", "10s", k, "--", "sh", "-c",
		`[ -e "$DIR/ended" ] && echo after || echo overlap`)
	assert.Equal(t, 0, second.code, second.stderr)
	assert.Equal(t, "after\n", second.stdout, "the second run ran beside the first's orphan")
	parent, _ := os.ReadFile(filepath.Join(dir, "parent"))
	assert.Equal(t, strconv.Itoa(first.Process.Pid)+"\n", string(parent), "the orphan's parent, once adopted")
	r := finish(t, first, &out[0], &out[1])
	assert.Equal(t, 0, r.code, r.stderr)
}
