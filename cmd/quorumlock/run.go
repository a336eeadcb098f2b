package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/fxmodule"
)

// forwarded are the signals that run passes on to COMMAND's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// unlimitedTries lets Acquire wait as long as --wait allows.
const unlimitedTries = 1 << 30

// runCommand is `quorumlock run`.
func runCommand(args []string, stdout, stderr io.Writer) int {
	s, pos, command, err := parse("run", args)
	if code, done := parsed(err, "run", stdout, stderr); done {
		return code
	}
	if len(pos) == 0 || len(command) == 0 {
		return usageFailure(stderr, "run", errors.New("want KEY [--] COMMAND [ARGS...] or KEY [KEY...] -- COMMAND [ARGS...]"))
	}
	if s.shared && len(pos) > 1 {
		return usageFailure(stderr, "run", fmt.Errorf("--shared takes one KEY, not %d: a read lock holds one key", len(pos)))
	}
	if s.permits > 0 && (s.shared || len(pos) > 1) {
		return usageFailure(stderr, "run", fmt.Errorf("-n takes one KEY and no --shared: a permit is one of KEY's %d", s.permits))
	}
	want := wanted{keys: pos, shared: s.shared, permits: s.permits}
	sigs := make(chan os.Signal, len(forwarded))
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	var opts []core.Option
	if s.wait > 0 && s.cfg.Tries == 0 {
		opts = append(opts, core.WithTries(unlimitedTries))
	}
	locker, err := newLocker(s.cfg, opts...)
	if err != nil {
		return failure(stderr, "run", want, &s, err)
	}
	defer closeSoon(locker)
	return hold(locker, want, &s, command, sigs, stderr).code
}

// term is how one hold of a lock ended.
type term struct {
	code      int  // the exit status it calls for
	ran       bool // COMMAND ran (and ended)
	signalled bool // a signal came, before COMMAND started or passed on to it
}

// hold takes the lock w, waiting up to s.wait (elect: 0 is for ever),
// keeps it alive, runs command under it (supervisor.run) and releases it.
func hold(locker *core.Locker, w wanted, s *settings, command []string, sigs <-chan os.Signal, stderr io.Writer) term {
	lock, sig, err := acquire(locker, w, s.wait, sigs)
	if err == nil && w.leader == "" { // Campaign keeps a leader's lock alive itself
		err = lock.KeepAlive()
	}
	if sig != nil || err != nil {
		_ = lock.Release(context.Background()) // nil-safe
		if sig != nil {
			say(stderr, "got %s before COMMAND started: COMMAND not run", signalName(sig))
			return term{code: 128 + int(sig.(syscall.Signal)), signalled: true}
		}
		name := "run"
		if w.leader != "" {
			name = "elect"
		}
		return term{code: failure(stderr, name, w, s, err)}
	}
	sv := &supervisor{lock: lock, ttl: locker.TTL(), killAfter: s.killAfter, stderr: stderr, then: s.then()}
	return sv.run(command, childEnv(lock, w.leader != ""), sigs)
}

// then says what follows a lost lock: exit status 79, or another
// campaign.
func (s *settings) then() string {
	if s.again {
		return "standing again"
	}
	return fmt.Sprintf("exit status %d", exitLost)
}

// run runs command with env under the lock, releases the lock once no
// process of command's group is left, and says how it ended.
func (sv *supervisor) run(command, env []string, sigs <-chan os.Signal) term {
	lock := sv.lock
	if err := adoptOrphans(); err != nil {
		say(sv.stderr, "%v; COMMAND's orphans go to init to be reaped", err)
	}
	child, err := start(command, env)
	if err != nil {
		_ = lock.Release(context.Background())
		printErr(sv.stderr, err)
		return term{code: startStatus(err)}
	}
	sv.pgid = child.Process.Pid
	state, stopped := sv.watch(child, sigs)
	takeTerminalBack(child.SysProcAttr)
	if stopped {
		say(sv.stderr, "COMMAND ended (%v) after the lock was lost or at risk; %s", state, sv.then)
	}
	if err := lock.Release(context.Background()); err != nil && !stopped && !errors.Is(err, core.ErrNotHeld) {
		say(sv.stderr, "COMMAND done, but the release failed (the lock expires within its TTL, %v): %v", sv.ttl, err)
	}
	t := term{code: exitStatus(state), ran: true, signalled: sv.signalled}
	if stopped {
		t.code = exitLost
	}
	return t
}

// newLocker builds the Locker of cfg with fxmodule's wiring, without its
// start-up check: the first round finds the servers that do not answer,
// within one node timeout.
func newLocker(cfg fxmodule.Config, opts ...core.Option) (*core.Locker, error) {
	res, err := fxmodule.New(fxmodule.Params{Config: cfg, Options: opts})
	if err != nil {
		return nil, err
	}
	return res.Locker, nil
}

// closeWait bounds the Locker's Close at exit: the locks are released
// already, and a hung server's client can hold Close for a second.
const closeWait = 200 * time.Millisecond

// closeSoon closes locker, waiting closeWait at most: the process is about
// to exit.
func closeSoon(locker *core.Locker) {
	done := make(chan struct{})
	go func() {
		_ = locker.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
}

// wanted is the lock that run asks for: one key, a set of keys (all or
// none), a shared (read) lock on one key, or one of a key's permits; or
// the leadership that elect campaigns for.
type wanted struct {
	keys    []string
	shared  bool
	permits int    // -n: one of this many permits
	leader  string // elect: the leader's value
}

// take makes one round for the lock (wait false), or waits for it until
// ctx ends. A campaign always waits.
func (w wanted) take(ctx context.Context, l *core.Locker, wait bool) (*core.Lock, error) {
	switch {
	case w.leader != "":
		return l.Campaign(ctx, w.keys[0], w.leader)
	case w.permits > 0 && wait:
		return l.AcquirePermit(ctx, w.keys[0], w.permits)
	case w.permits > 0:
		return l.TryAcquirePermit(ctx, w.keys[0], w.permits)
	case w.shared && wait:
		return l.AcquireShared(ctx, w.keys[0])
	case w.shared:
		return l.TryAcquireShared(ctx, w.keys[0])
	case len(w.keys) > 1 && wait:
		return l.AcquireAll(ctx, w.keys...)
	case len(w.keys) > 1:
		return l.TryAcquireAll(ctx, w.keys...)
	case wait:
		return l.Acquire(ctx, w.keys[0])
	}
	return l.TryAcquire(ctx, w.keys[0])
}

// String names the lock in messages: lock "k", read lock "k", or
// locks "a", "b".
func (w wanted) String() string {
	quoted := make([]string, len(w.keys))
	for i, k := range w.keys {
		quoted[i] = strconv.Quote(k)
	}
	switch {
	case w.leader != "":
		return "leadership of " + quoted[0]
	case w.permits > 0:
		return fmt.Sprintf("semaphore %s (%d permits)", quoted[0], w.permits)
	case w.shared:
		return "read lock " + quoted[0]
	case len(w.keys) > 1:
		return "locks " + strings.Join(quoted, ", ")
	}
	return "lock " + quoted[0]
}

// heldElsewhere says why the lock was refused, after waiting wait.
func (w wanted) heldElsewhere(wait time.Duration) string {
	still, after := "", ""
	if wait > 0 {
		still, after = "still ", fmt.Sprintf(" after waiting %v", wait)
	}
	switch {
	case w.leader != "":
		return fmt.Sprintf("%s: %sled elsewhere%s", w, still, after)
	case w.permits > 0:
		return fmt.Sprintf("%s: every permit is %sheld elsewhere%s", w, still, after)
	case w.shared:
		return fmt.Sprintf("%s is %srefused%s: a writer holds the key elsewhere, or waits for it", w, still, after)
	case len(w.keys) > 1:
		return fmt.Sprintf("%s: one or more is %sheld elsewhere%s", w, still, after)
	}
	return fmt.Sprintf("%s is %sheld elsewhere%s", w, still, after)
}

// acquire takes the lock w, waiting up to wait for it (0: one try). A
// signal on sigs stops the wait; it is returned, with the lock if one was
// taken meanwhile.
func acquire(locker *core.Locker, w wanted, wait time.Duration, sigs <-chan os.Signal) (lock *core.Lock, got os.Signal, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case got = <-sigs:
			cancel()
		case <-ctx.Done(): // acquired or given up: the lock does not keep ctx
		}
	})
	if wait == 0 {
		lock, err = w.take(ctx, locker, false)
	} else {
		wctx, wcancel := context.WithTimeout(ctx, wait)
		lock, err = w.take(wctx, locker, true)
		wcancel()
	}
	cancel()
	wg.Wait()
	return lock, got, err
}

// start runs command in its own process group with env.
func start(command, env []string) (*exec.Cmd, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot run COMMAND: %w", err)
	}
	return cmd, nil
}

// childEnv is COMMAND's environment: quorumlock's, with QUORUMLOCK_KEY,
// with fencing QUORUMLOCK_TOKEN, and for a leader QUORUMLOCK_TERM, the
// term, which is its token too. What an outer quorumlock set under those
// names is dropped: it is not this lock's.
func childEnv(lock *core.Lock, leader bool) []string {
	names := []string{envPrefix + "_KEY", envPrefix + "_TOKEN"}
	set := []string{names[0] + "=" + lock.Key()}
	if t := lock.Token(); t != 0 {
		set = append(set, names[1]+"="+strconv.FormatInt(t, 10))
	}
	if leader {
		names = append(names, envPrefix+"_TERM")
		set = append(set, names[2]+"="+strconv.FormatInt(lock.Token(), 10))
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
	return append(env, set...)
}

// parsed reports whether parse's err ends the command, and with which
// status: help is asked for (0) or the command line is bad (64).
func parsed(err error, name string, stdout, stderr io.Writer) (int, bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return exitOK, true
	}
	return usageFailure(stderr, name, err), true
}

// failure reports err, from building the Locker or from the lock w, and
// returns the exit status it calls for: 64, with the usage line, for
// bad input; the conflict status when the lock is (or may be) held
// elsewhere, said unless --quiet; 69 otherwise.
func failure(stderr io.Writer, name string, w wanted, s *settings, err error) int {
	switch {
	case errors.Is(err, core.ErrInvalidArgument):
		return usageFailure(stderr, name, err)
	case conflicting(err):
		if !s.quiet {
			explain(stderr, w, s.wait, err)
		}
		return s.conflict
	}
	explain(stderr, w, s.wait, err)
	return exitUnavailable
}

func usageFailure(stderr io.Writer, name string, err error) int {
	synopsis := map[string]string{
		"run":    "quorumlock run [flags] KEY [--] COMMAND [ARGS...]\n       quorumlock run [flags] KEY [KEY...] -- COMMAND [ARGS...]\n       quorumlock run -n K [flags] KEY [--] COMMAND [ARGS...]",
		"elect":  "quorumlock elect [flags] KEY [--] COMMAND [ARGS...]",
		"status": "quorumlock status [flags] KEY\n       quorumlock status -n K [flags] KEY",
	}[name]
	fmt.Fprintf(stderr, "quorumlock %s: %s\nusage: %s\n('quorumlock help' lists the flags and exit statuses)\n",
		name, optionNames.Replace(unprefixed(err.Error())), synopsis)
	return exitUsage
}

// optionNames turns the library's option names in an error into the
// command's flags and variables.
var optionNames = strings.NewReplacer(
	"fxmodule: invalid argument: ", "",
	"WithTTL", "--ttl",
	"WithNodeTimeout", "--node-timeout",
	"WithKeepAlive", "QUORUMLOCK_KEEP_ALIVE",
	"WithMaxHold", "QUORUMLOCK_MAX_HOLD",
	"WithAtRiskMargin", "a fifth of --ttl",
)

// reason is the category of a lock error: a QuorumError's Reason (its
// nodes' own errors may match other categories), or err itself.
func reason(err error) error {
	var qe *core.QuorumError
	if errors.As(err, &qe) && qe.Reason != nil {
		return qe.Reason
	}
	return err
}

// conflicting reports whether err says the lock is held elsewhere, or may
// be: servers that restarted within the TTL do not vote yet.
func conflicting(err error) bool {
	r := reason(err)
	return errors.Is(r, core.ErrNotAcquired) || errors.Is(r, core.ErrNodeRestarted)
}

// say writes one line on w, "quorumlock: " first and nowhere else: the
// library's errors each start with it, and nest.
func say(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "quorumlock: %s\n", unprefixed(fmt.Sprintf(format, args...)))
}

func unprefixed(msg string) string { return strings.ReplaceAll(msg, "quorumlock: ", "") }

// printErr writes err on one line.
func printErr(w io.Writer, err error) { say(w, "%v", err) }

// explain says on one line why the lock w was not acquired, and the
// round's details on the next.
func explain(out io.Writer, w wanted, wait time.Duration, err error) {
	switch r := reason(err); {
	case errors.Is(r, core.ErrNotAcquired):
		say(out, "%s", w.heldElsewhere(wait))
	case errors.Is(r, core.ErrNodeRestarted):
		say(out, "%s may be held elsewhere: servers (re)started within the TTL, and the restart guard keeps them "+
			"from voting until a lock they may have forgotten has expired; servers that never held a lock can be "+
			"adopted once with redis-cli -h HOST -p PORT SET %s 0 (docs/restart-guard.md)", w, driver.BirthKey)
	case errors.Is(r, core.ErrUnavailable):
		say(out, "%s: fewer than a quorum of servers answered", w)
	default:
		printErr(out, err)
		return
	}
	fmt.Fprintf(out, "  %s\n", unprefixed(err.Error()))
}

// startStatus is the exit status for a COMMAND that could not be started.
func startStatus(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) || errors.Is(err, exec.ErrDot) {
		return exitNotFound
	}
	return exitCannotRun
}

// exitStatus is COMMAND's status as a shell reports it: 128+N when killed
// by signal N.
func exitStatus(state *os.ProcessState) int {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}

// signalName names the forwarded signals as kill(1) does.
func signalName(sig os.Signal) string {
	names := map[os.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT"}
	if n, ok := names[sig]; ok {
		return n
	}
	return sig.String()
}
