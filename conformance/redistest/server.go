package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// EnvBinary names the environment variable that overrides the redis-server
// binary; without it, redis-server is looked up on PATH.
const EnvBinary = "QUORUMLOCK_REDIS_SERVER"

// ErrNoBinary is returned when no redis-server binary can be found.
var ErrNoBinary = errors.New("redistest: redis-server not found (install Debian's redis-server package, run `make test` which installs it, or set " + EnvBinary + ")")

// Binary returns the path of the redis-server binary.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", ErrNoBinary, EnvBinary, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNoBinary
	}
	return p, nil
}

// startTimeout bounds how long a server may take to answer after start.
const startTimeout = 15 * time.Second

// Server is one redis-server process on a loopback port, owned by the code
// that started it. It runs without persistence, so a restarted server comes
// back empty, unless it was stopped with StopKeepingData. Its methods are
// safe for concurrent use.
type Server struct {
	bin  string
	port int
	dir  string
	args []string
	env  []string // added to this process's environment

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	output *lockedBuffer // the process's stdout and stderr, for error reports
	paused bool
	closed bool
	keep   bool // the next Restart loads the snapshot StopKeepingData wrote
}

// Option configures a Server. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil Option is skipped.
type Option interface {
	apply(*serverConfig)
	// String shows the option as written, for logs and comparison.
	String() string
}

type option struct {
	fn   func(*serverConfig)
	name string
}

func (o option) apply(c *serverConfig) { o.fn(c) }
func (o option) String() string        { return o.name }

type serverConfig struct {
	args  []string
	env   []string
	port  int
	fresh bool
}

// WithFresh, on, leaves a new server unadopted. Off, StartServer adopts
// every server that is not a cluster member for the restart guard (it sets
// driver.BirthKey to 0, as core.Locker.Adopt does), since a server this
// harness has just started holds no lock. A fresh server is young to the
// guard for its max TTL after its first guarded acquisition, like a server
// restarted empty.
// Default: off.
func WithFresh(on bool) Option {
	return option{func(c *serverConfig) { c.fresh = on }, "WithFresh(" + strconv.FormatBool(on) + ")"}
}

// WithArgs adds redis-server command-line arguments, such as
// "--cluster-enabled", "yes"; each WithArgs adds to the earlier ones.
// Default: none beyond the harness's own.
// Arguments redis-server refuses make StartServer return its error.
func WithArgs(args ...string) Option {
	return option{func(c *serverConfig) { c.args = append(c.args, args...) }, "WithArgs(" + quoted(args) + ")"}
}

// WithEnv adds "NAME=value" entries to the server process's environment,
// which is otherwise this process's, at every start and restart: for
// example LD_PRELOAD and FAKETIME, to run it with a faster clock
// (conformance/safety's StartFastServer). Each WithEnv adds to the earlier
// ones; a later entry of one name wins.
// Default: none.
func WithEnv(env ...string) Option {
	return option{func(c *serverConfig) { c.env = append(c.env, env...) }, "WithEnv(" + quoted(env) + ")"}
}

// quoted returns strs quoted and joined by commas, as a call shows them.
func quoted(strs []string) string {
	q := make([]string, len(strs))
	for i, s := range strs {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// WithPort runs the server on port; 0 keeps the default.
// Default: a free port chosen at start.
// A port that is taken makes StartServer return an error.
func WithPort(port int) Option {
	return option{func(c *serverConfig) { c.port = port }, "WithPort(" + strconv.Itoa(port) + ")"}
}

// StartServer starts a redis-server on a free loopback port and waits until
// it answers as itself (INFO reports its process id), trying another port
// when one turns out taken. The process is killed if this process dies.
func StartServer(ctx context.Context, opts ...Option) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var c serverConfig
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s := &Server{bin: bin, dir: dir, args: c.args, env: c.env}
	// A port found free can be taken before the server binds it: try again
	// with another one.
	for attempt := 0; ; attempt++ {
		s.port = c.port
		if s.port == 0 {
			if s.port, err = FreePort(); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
		err = s.start(ctx)
		if err == nil && !c.fresh && !slices.Contains(c.args, "--cluster-enabled") {
			if err = s.Adopt(ctx); err != nil {
				_ = s.Close()
				return nil, err
			}
		}
		if err == nil {
			return s, nil
		}
		if c.port != 0 || attempt == 4 || ctx.Err() != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// Adopt marks the server adopted for the restart guard (its birth key set
// to 0, as core.Locker.Adopt does), as StartServer does for a new server:
// a test that restarts a server empty calls it when the restart is not
// what it tests.
func (s *Server) Adopt(ctx context.Context) error {
	c := plainClient(s.Addr())
	defer c.Close()
	if err := c.Set(ctx, driver.BirthKey, "0", 0).Err(); err != nil {
		return fmt.Errorf("redistest: adopting %s: %w", s.Addr(), err)
	}
	return nil
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start(ctx context.Context) error {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--loglevel", "warning",
		"--logfile", "",
	}
	args = append(args, s.args...)
	cmd := exec.Command(s.bin, args...)
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
	out := new(lockedBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.output, s.paused = cmd, exited, out, false
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		if pid, err := serverPID(ctx, s.Addr()); err == nil {
			if pid == cmd.Process.Pid {
				return nil
			}
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redistest: port %d is taken by another redis-server (pid %d)", s.port, pid)
		}
		select {
		case <-exited:
			return fmt.Errorf("redistest: redis-server on port %d exited at start: %s", s.port, strings.TrimSpace(out.String()))
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redistest: redis-server on port %d did not answer within %v: %s", s.port, startTimeout, strings.TrimSpace(out.String()))
		case <-time.After(delay):
		}
	}
}

// serverPID asks the server at addr for its process id (INFO server) over
// a fresh connection. Whoever answers on a port may not be the process
// that was started for it: two servers started at once can be handed the
// same free port, and the one that loses the bind exits while the other
// answers.
func serverPID(ctx context.Context, addr string) (int, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) > time.Second {
		deadline = time.Now().Add(time.Second)
	}
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write([]byte("INFO server\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(head), "$"))
	if !strings.HasPrefix(head, "$") || err != nil {
		return 0, fmt.Errorf("redistest: INFO answered %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("redistest: INFO server has no process_id")
}

// Addr returns the server's "127.0.0.1:port".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Running reports whether the process is up (it may be paused).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runningLocked()
}

func (s *Server) runningLocked() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Stop shuts the server down (SIGTERM) and waits for the process to end.
// Without persistence its keys are gone; Restart brings it back empty.
func (s *Server) Stop() error {
	err := s.signalAndWait(syscall.SIGTERM)
	s.mu.Lock()
	s.keep = false
	s.mu.Unlock()
	return err
}

// snapshot is the file redis-server saves to and loads from, in its
// directory (the default dbfilename).
const snapshot = "dump.rdb"

// StopKeepingData shuts the server down as a server with persistence goes
// down: it sends SHUTDOWN SAVE, which writes every key to a snapshot and
// exits with no command run in between, and waits for the process to end.
// The next Restart loads the snapshot: the server comes back with its keys
// (those not expired meanwhile, with their expiry times) and no scripts.
// A paused server cannot be stopped this way.
func (s *Server) StopKeepingData(ctx context.Context) error {
	s.mu.Lock()
	if !s.runningLocked() {
		s.mu.Unlock()
		return fmt.Errorf("redistest: stop keeping data of %s, which is not running", s.Addr())
	}
	if s.paused {
		s.mu.Unlock()
		return fmt.Errorf("redistest: stop keeping data of %s, which is paused", s.Addr())
	}
	exited := s.exited
	s.mu.Unlock()

	cl := plainClient(s.Addr())
	// The server closes the connection as it exits: a reply error is
	// expected, and only matters if the process stays up.
	reply := cl.ShutdownSave(ctx).Err()
	_ = cl.Close()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("redistest: %s still running 10s after SHUTDOWN SAVE (reply: %v): %s", s.Addr(), reply, s.Output())
	}
	if _, err := os.Stat(filepath.Join(s.dir, snapshot)); err != nil {
		return fmt.Errorf("redistest: %s wrote no snapshot at SHUTDOWN SAVE (reply: %v): %w", s.Addr(), reply, err)
	}
	s.mu.Lock()
	s.keep = true
	s.mu.Unlock()
	return nil
}

// Kill kills the server (SIGKILL) and waits for the process to end.
func (s *Server) Kill() error { return s.signalAndWait(syscall.SIGKILL) }

func (s *Server) signalAndWait(sig syscall.Signal) error {
	s.mu.Lock()
	if !s.runningLocked() {
		s.mu.Unlock()
		return nil
	}
	cmd, exited, paused := s.cmd, s.exited, s.paused
	s.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redistest: signalling %s: %w", s.Addr(), err)
	}
	if paused {
		// A stopped process only acts on SIGTERM once continued.
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
	return nil
}

// Restart starts a stopped or killed server again on the same port and
// waits until it answers: empty, or with its keys after StopKeepingData.
// It kills a running server first (which then comes back empty).
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	keep := s.keep && !s.runningLocked()
	s.keep = false
	s.mu.Unlock()
	if err := s.Kill(); err != nil {
		return err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("redistest: restart of a closed server")
	}
	if !keep {
		if err := os.Remove(filepath.Join(s.dir, snapshot)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("redistest: %w", err)
		}
	}
	// The port can stay busy for a moment after the kill.
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = s.start(ctx); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// Pause stops the process with SIGSTOP: it keeps its connections open and
// answers nothing until Resume, like a server stalled by the OS.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return fmt.Errorf("redistest: pause of %s, which is not running", s.Addr())
	}
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("redistest: pausing %s: %w", s.Addr(), err)
	}
	s.paused = true
	return nil
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() || !s.paused {
		return nil
	}
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("redistest: resuming %s: %w", s.Addr(), err)
	}
	s.paused = false
	return nil
}

// Close kills the server and removes its directory. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.Kill()
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}

// Output returns what the process has printed, for diagnostics.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.output == nil {
		return ""
	}
	return s.output.String()
}

// lockedBuffer is a buffer safe for the process's two output streams and
// for readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
