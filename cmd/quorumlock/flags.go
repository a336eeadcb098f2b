package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/fxmodule"
)

// envPrefix is the prefix of every variable quorumlock reads: fxmodule's.
const envPrefix = fxmodule.DefaultEnvPrefix

// Defaults of run's own settings.
const (
	defaultKillAfter = 10 * time.Second
)

// settings are a command's settings: the Locker's (fxmodule's Config) and
// quorumlock's own.
type settings struct {
	cfg                    fxmodule.Config
	tlsCA, tlsCert, tlsKey string
	wait                   time.Duration // run: how long to wait for the lock
	conflict               int           // run: the exit status when held elsewhere
	killAfter              time.Duration // run: SIGTERM to SIGKILL
	quiet                  bool          // run: nothing on stderr when held elsewhere
	shared                 bool          // run: a shared (read) lock
	permits                int           // run, status: -n, the semaphore's permits (0: not one)
	value                  bool          // status: print the value
	waitSet                bool          // elect: --wait was given
	again                  bool          // elect: stand again after each term
	leader                 string        // elect: the value a leader shows
}

// parse reads the settings of subcommand name ("run", "elect" or "status")
// from the environment, then from args, and returns them with the
// positional arguments and, for run and elect, COMMAND. Every error is a fault of the command
// line or the environment (exit 64), but flag.ErrHelp, which asks for the
// usage.
func parse(name string, args []string) (s settings, pos, command []string, err error) {
	if s, err = fromEnv(name); err != nil {
		return settings{}, nil, nil, err
	}
	fs := flag.NewFlagSet("quorumlock "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error is reported once, by the caller
	s.define(fs, name)
	pos, command, err = parseArgs(fs, args, name != "status")
	if err != nil {
		return settings{}, nil, nil, err
	}
	if err := s.finish(); err != nil {
		return settings{}, nil, nil, err
	}
	return s, pos, command, nil
}

// fromEnv reads every QUORUMLOCK_ variable of subcommand name: fxmodule's
// Config, then quorumlock's own (QUORUMLOCK_WAIT is run's alone: a value
// meant for run must not make an elect standby give up, nor fail it).
func fromEnv(name string) (settings, error) {
	var s settings
	cfg, err := fxmodule.ConfigFromEnv(envPrefix)
	if err != nil {
		return settings{}, err
	}
	s.cfg, s.conflict, s.killAfter = cfg, exitConflict, defaultKillAfter
	var errs []error
	read := func(name string, set func(string) error) {
		if v := strings.TrimSpace(os.Getenv(envPrefix + "_" + name)); v != "" {
			if err := set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s_%s: %w", envPrefix, name, err))
			}
		}
	}
	if name == "run" {
		read("WAIT", durationSetter(&s.wait))
	}
	read("KILL_AFTER", durationSetter(&s.killAfter))
	read("CONFLICT_EXIT_CODE", statusSetter(&s.conflict))
	read("QUIET", boolSetter(&s.quiet))
	read("TLS_CA", stringSetter(&s.tlsCA))
	read("TLS_CERT", stringSetter(&s.tlsCert))
	read("TLS_KEY", stringSetter(&s.tlsKey))
	if err := errors.Join(errs...); err != nil {
		return settings{}, err
	}
	return s, nil
}

// define declares the flags of subcommand name over s, whose values (from
// the environment) are the defaults.
func (s *settings) define(fs *flag.FlagSet, name string) {
	// fxmodule's settings parse as their variables do (Config.Set).
	config := func(name string, boolean bool) {
		set := func(v string) error { return s.cfg.Set(name, v) }
		if boolean {
			fs.BoolFunc(name, "", set)
		} else {
			fs.Func(name, "", set)
		}
	}
	for _, name := range []string{"addrs", "driver", "ttl", "node-timeout", "key-prefix", "username", "password"} {
		config(name, false)
	}
	config("cluster", true)
	config("tls", true)
	fs.StringVar(&s.tlsCA, "tls-ca", s.tlsCA, "")
	fs.StringVar(&s.tlsCert, "tls-cert", s.tlsCert, "")
	fs.StringVar(&s.tlsKey, "tls-key", s.tlsKey, "")
	if name != "status" {
		fs.Func("kill-after", "", durationSetter(&s.killAfter))
		fs.Func("conflict-exit-code", "", statusSetter(&s.conflict))
		fs.BoolVar(&s.quiet, "quiet", s.quiet, "")
	}
	// No variable for -n: permits where a mutex was meant would let
	// several holders in.
	switch name {
	case "run":
		fs.Func("wait", "", durationSetter(&s.wait))
		config("fencing", true)
		// No variable: a read lock where a write lock was meant would let
		// two writers in.
		fs.BoolVar(&s.shared, "shared", false, "")
		fs.Func("n", "", permitsSetter(&s.permits))
	case "elect":
		// Only the flag: QUORUMLOCK_WAIT is run's (fromEnv).
		fs.Func("wait", "", func(v string) error { s.waitSet = true; return durationSetter(&s.wait)(v) })
		fs.BoolVar(&s.again, "again", false, "")
		fs.Func("value", "", func(v string) error {
			if v == "" {
				return errors.New("empty: give the value a leader shows, or no --value for HOST:PID")
			}
			s.leader = v
			return nil
		})
	case "status":
		fs.BoolVar(&s.value, "value", false, "")
		fs.Func("n", "", permitsSetter(&s.permits))
	}
}

// parseArgs parses flags and positional arguments. For run, flags come
// before the keys. The first "--" after the first KEY ends the keys and
// COMMAND follows it, whatever it contains; without one, COMMAND follows
// the one KEY (flock(1) reads it so). For status, flags may also follow
// KEY.
func parseArgs(fs *flag.FlagSet, args []string, hasCommand bool) (pos, command []string, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, err
			}
			// The flag package names flags with one dash; the docs, two
			// for a long name (--wait) and one for a letter (-n).
			return nil, nil, errors.New(longFlag.ReplaceAllString(err.Error(), "$1 --$2"))
		}
		if args = fs.Args(); len(args) == 0 {
			return pos, nil, nil
		}
		if hasCommand {
			return splitCommand(args)
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// longFlag matches a long flag's name, with one dash, in the flag
// package's errors.
var longFlag = regexp.MustCompile(`(flag|defined:) -([a-z][a-z-]+)`)

// splitCommand splits run's arguments after the flags into the keys and
// COMMAND: KEY [KEY...] -- COMMAND, or KEY COMMAND when no "--" follows
// KEY. An argument that starts with "-" where a key or COMMAND's first
// word should be is a misplaced flag.
func splitCommand(args []string) (keys, command []string, err error) {
	keys, command = args[:1], args[1:]
	if end := slices.Index(args, "--"); end > 0 {
		keys, command = args[:end], args[end+1:]
		for _, a := range keys[1:] {
			if strings.HasPrefix(a, "-") {
				return nil, nil, fmt.Errorf("%q among the keys before --: put flags before KEY; "+
					"a COMMAND with a -- of its own follows KEY --", a)
			}
			// "run KEY make -- x" meant COMMAND "make -- x" before several
			// keys were allowed: refuse a key that is also a command rather
			// than run x under the keys KEY and make.
			if isCommand(a) {
				return nil, nil, fmt.Errorf("%q among the keys before -- is also a command: write KEY -- COMMAND to run it; "+
					"to lock a key of that name, give it a prefix, such as %s", a, beside(keys[0], a))
			}
		}
	} else if len(command) > 0 && strings.HasPrefix(command[0], "-") {
		return nil, nil, fmt.Errorf("%q after KEY: put flags before KEY; COMMAND follows KEY, or KEY [KEY...] --", command[0])
	}
	return keys, command, nil
}

// commandDirs are where commands usually live, looked in beside PATH, so
// that a key is judged a command the same way under cron's short PATH as
// in a login shell.
var commandDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/snap/bin"}

// isCommand reports whether word names a command: found on PATH, or in
// one of commandDirs.
func isCommand(word string) bool {
	if _, err := exec.LookPath(word); err == nil {
		return true
	}
	if strings.ContainsRune(word, '/') {
		return false
	}
	for _, dir := range commandDirs {
		if fi, err := os.Stat(filepath.Join(dir, word)); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// beside names a key for word in key's cluster slot: in key's hash tag
// when it has one ({acct}:alice gives {acct}:sync), else in a tag of key.
func beside(key, word string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key[open:open+end+2] + ":" + word
		}
	}
	return "{" + key + "}:" + word
}

// finish checks what the flags cannot, and builds the TLS configuration.
func (s *settings) finish() error {
	if s.wait < 0 {
		return fmt.Errorf("--wait %v is negative", s.wait)
	}
	if s.killAfter < 0 {
		return fmt.Errorf("--kill-after %v is negative", s.killAfter)
	}
	if len(s.cfg.Addrs) == 0 {
		return fmt.Errorf("no servers: give --addrs HOST:PORT,... or set %s_ADDRS", envPrefix)
	}
	cfg, err := s.tlsConfig()
	if err != nil {
		return err
	}
	if cfg != nil {
		s.cfg.TLS, s.cfg.TLSConfig = true, cfg
	}
	return nil
}

// tlsConfig is the TLS configuration the --tls-* files describe, or nil
// when none is given (--tls alone needs none).
func (s *settings) tlsConfig() (*tls.Config, error) {
	if s.tlsCA == "" && s.tlsCert == "" && s.tlsKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.tlsCA != "" {
		pem, err := os.ReadFile(s.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: no PEM certificate in %s", s.tlsCA)
		}
	}
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together: give both or neither")
	}
	if s.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func durationSetter(d *time.Duration) func(string) error {
	return func(v string) error {
		parsed, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration (want a Go duration such as 30s or 10m)", v)
		}
		*d = parsed
		return nil
	}
}

func statusSetter(n *int) func(string) error {
	return func(v string) error {
		parsed, err := strconv.Atoi(v)
		if err != nil || parsed < 0 || parsed > 255 {
			return fmt.Errorf("%q is not an exit status (want 0 to 255)", v)
		}
		*n = parsed
		return nil
	}
}

// permitsSetter parses -n: a semaphore's number of permits, 1 or more.
func permitsSetter(n *int) func(string) error {
	return func(v string) error {
		parsed, err := strconv.Atoi(v)
		if err != nil || parsed < 1 {
			return errors.New("want the number of permits, 1 or more")
		}
		*n = parsed
		return nil
	}
}

func boolSetter(b *bool) func(string) error {
	return func(v string) error {
		parsed, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (want true or false)", v)
		}
		*b = parsed
		return nil
	}
}

func stringSetter(p *string) func(string) error {
	return func(v string) error { *p = v; return nil }
}
