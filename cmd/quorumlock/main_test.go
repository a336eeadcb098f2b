package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
)

// asCLI makes the test binary quorumlock itself: the tests run it as a
// real child process, with real signals and exit statuses.
const asCLI = "QUORUMLOCK_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
	}
	redistest.Main(m)
}

// serverAddrs starts three servers for the calling test alone, and
// returns their addresses.
func serverAddrs(t *testing.T, opts ...redistest.Option) []string {
	t.Helper()
	return addrsOf(ownServers(t, 3, opts...))
}

func addrsOf(servers []*redistest.Server) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// ownServers returns n servers for the calling test alone: from the test
// binary's pool (redistest.TestServers), or, with options, new ones.
func ownServers(t *testing.T, n int, opts ...redistest.Option) []*redistest.Server {
	t.Helper()
	if len(opts) == 0 {
		return redistest.TestServers(t, n)
	}
	redistest.RequireServer(t)
	servers := make([]*redistest.Server, n)
	for i := range servers {
		servers[i] = redistest.StartTestServer(t, opts...)
	}
	return servers
}

// quorumlock is the command line args of quorumlock over addrs, ready to
// start: a real process, the test binary acting as quorumlock, with an
// environment of the test's plus env (NAME=value).
func quorumlock(t *testing.T, addrs []string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCLI+"=1", "QUORUMLOCK_ADDRS="+strings.Join(addrs, ","))
	cmd.Env = append(cmd.Env, env...)
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// result is how a quorumlock process ended.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs quorumlock to its end, within a minute.
func runCLI(t *testing.T, addrs []string, env []string, args ...string) result {
	t.Helper()
	cmd := quorumlock(t, addrs, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	return finish(t, cmd, &stdout, &stderr)
}

// finish waits for a started quorumlock, within a minute. Output read
// through pipes (lineReader) is read to its end first: Wait closes them.
func finish(t *testing.T, cmd *exec.Cmd, stdout, stderr fmt.Stringer) result {
	t.Helper()
	for _, out := range []fmt.Stringer{stdout, stderr} {
		if lr, ok := out.(*lineReader); ok {
			lr.drain(t)
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			require.NoError(t, err)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("quorumlock %q did not end within a minute; stderr: %s", cmd.Args[1:], stderr)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// testLocker is a Locker of the test's own over addrs, to hold or inspect
// keys beside quorumlock processes, with patient's node timeout.
func testLocker(t *testing.T, addrs []string) *core.Locker {
	t.Helper()
	l, err := newLocker(fxmodule.Config{Addrs: addrs, Driver: fxmodule.DriverGoRedis, TTL: time.Minute, NodeTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func heldNow(t *testing.T, l *core.Locker, key string) bool {
	t.Helper()
	st, err := l.Inspect(t.Context(), key)
	require.NoError(t, err)
	return st.Held()
}

// lineReader reads a started process's output line by line.
type lineReader struct {
	lines chan string
	all   strings.Builder
	mu    sync.Mutex
}

func readLines(t *testing.T, r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan string, 100)}
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			lr.mu.Lock()
			lr.all.WriteString(s.Text() + "\n")
			lr.mu.Unlock()
			lr.lines <- s.Text()
		}
		close(lr.lines)
	}()
	return lr
}

func (lr *lineReader) String() string {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.all.String()
}

// drain reads to the end of the output (every writer closed it), within
// a minute.
func (lr *lineReader) drain(t *testing.T) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case _, ok := <-lr.lines:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("output did not end within a minute; got %q", lr.String())
		}
	}
}

// await returns the next line that starts with prefix, within timeout.
func (lr *lineReader) await(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-lr.lines:
			require.True(t, ok, "output ended before a line %q; got %q", prefix, lr.String())
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-deadline:
			t.Fatalf("no line %q within %v; got %q", prefix, timeout, lr.String())
		}
	}
}

// readyLoop is a COMMAND that says "ready" and its PID, then runs until
// stopped.
const readyLoop = `echo "ready $$"; while :; do sleep 0.05; done`

// running is a started quorumlock whose COMMAND (readyLoop) is ready.
type running struct {
	cmd            *exec.Cmd
	stdout, stderr *lineReader
	pgid           int // COMMAND's process group
}

// startRun starts quorumlock with args, whose COMMAND ends in readyLoop,
// and waits for COMMAND to be ready.
func startRun(t *testing.T, addrs []string, args ...string) *running {
	t.Helper()
	cmd := quorumlock(t, addrs, nil, args...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errOut, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	r := &running{cmd: cmd, stdout: readLines(t, out), stderr: readLines(t, errOut)}
	r.pgid = atoi(t, strings.TrimPrefix(r.stdout.await(t, "ready ", 30*time.Second), "ready "))
	return r
}

// requireGone checks that nothing of COMMAND's process group is left, once
// the kernel has reaped it.
func (r *running) requireGone(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return errors.Is(syscall.Kill(-r.pgid, 0), syscall.ESRCH) },
		10*time.Second, 10*time.Millisecond, "something of COMMAND is left")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	require.NoError(t, err, "%q", s)
	return n
}

func key(t *testing.T) string { return "ql-test:" + t.Name() }

// onePrefix checks that every line of stderr names quorumlock once at
// most: the library's errors each start with "quorumlock: ", and nest.
func onePrefix(t *testing.T, stderr string) {
	t.Helper()
	for line := range strings.Lines(stderr) {
		assert.LessOrEqual(t, strings.Count(line, "quorumlock: "), 1, "%q", line)
	}
}
