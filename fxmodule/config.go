package fxmodule

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// Driver names, the values of Config.Driver.
const (
	DriverGoRedis = "goredis" // github.com/redis/go-redis/v9
	DriverRedigo  = "redigo"  // github.com/gomodule/redigo
	DriverRueidis = "rueidis" // github.com/redis/rueidis
)

// Strategy names, the values of Config.Strategy.
const (
	StrategyParallel   = "parallel"
	StrategySequential = "sequential"
	StrategyFailFast   = "failfast"
)

// Defaults of the fields whose zero value does not mean a core default.
const (
	// DefaultDriver is the driver used when Config.Driver is empty.
	DefaultDriver = DriverRueidis
	// DefaultPingTimeout bounds the start-up check of every node when
	// Config.PingTimeout is zero.
	DefaultPingTimeout = 2 * time.Second
	// DefaultEnvPrefix is the prefix of the environment variables that
	// ConfigFromEnv reads when given an empty prefix.
	DefaultEnvPrefix = "QUORUMLOCK"
)

// Config describes the Locker that Module provides: which servers, through
// which driver, and the core options. Every field's zero value means a
// default, named in its comment; the core defaults are those of core.New
// (see the core.With... options).
type Config struct {
	// Driver is the Redis client the module builds for each server:
	// "goredis", "redigo" or "rueidis". Default: "rueidis" (DefaultDriver).
	// Ignored when the app contributes nodes to the NodesGroup group.
	Driver string

	// Addrs are the servers, "host:port". Without Cluster, each is an
	// independent Redis master and one Redlock node. Required unless the
	// app contributes nodes to the NodesGroup group, which then replace
	// them.
	Addrs []string

	// Cluster makes Addrs the seed addresses of ONE Redis Cluster, which is
	// one Redlock node (its masters are not independent voters). goredis
	// and rueidis only: redigo has no cluster client. Default: false.
	Cluster bool

	// Strategy is how a round asks the nodes: "parallel", "sequential" or
	// "failfast" (see package strategies). Default: "parallel", core's
	// default.
	Strategy string

	// StopAtQuorum makes the strategy stop at the quorum-th vote instead
	// of asking every node (strategies.StopAtQuorum). Default: false
	// (greedy).
	StopAtQuorum bool

	// TTL is how long a lock lives on a node unless extended
	// (core.WithTTL). Default: 10 s (core.DefaultTTL).
	TTL time.Duration

	// Tries is how many rounds Acquire makes at most (core.WithTries).
	// Default: 32 (core.DefaultTries).
	Tries int

	// RetryMin and RetryMax bound the random delay between two rounds of
	// Acquire (core.WithRetryDelay with core.JitterDelay). Defaults: 50 ms
	// (core.DefaultRetryMin) and the larger of 250 ms
	// (core.DefaultRetryMax) and RetryMin.
	RetryMin, RetryMax time.Duration

	// NodeTimeout bounds every call to a node (core.WithNodeTimeout).
	// Default: 50 ms (core.DefaultNodeTimeout).
	NodeTimeout time.Duration

	// Quorum is how many nodes must grant a lock (core.WithQuorum).
	// Default: 0, a majority (N/2+1).
	Quorum int

	// KeyPrefix is put before every lock key (core.WithKeyPrefix).
	// Default: none.
	KeyPrefix string

	// KeepAlive is how often a kept-alive lock is extended
	// (core.WithKeepAlive). Default: TTL/3.
	KeepAlive time.Duration

	// MaxHold bounds how long a lock is kept alive (core.WithMaxHold).
	// Default: 0, no limit.
	MaxHold time.Duration

	// Fencing turns fencing tokens on (core.WithFencing). Default: off.
	Fencing bool

	// RestartGuard is the restart guard's max TTL (core.WithRestartGuard):
	// the longest TTL of any Locker on these servers. Default: 0, core's
	// default (on, with the TTL, for three nodes or more).
	RestartGuard time.Duration

	// DisableRestartGuard turns the restart guard off
	// (core.WithoutRestartGuard). Default: false.
	DisableRestartGuard bool

	// AdoptNodes adopts every node for the restart guard when the app
	// starts (core.Locker.Adopt), so that fresh servers vote at once. Set
	// it only for servers known to hold no lock, such as a first
	// deployment: adopting a server that restarted empty while locks were
	// held on it is the mistake the guard prevents. Default: false.
	AdoptNodes bool

	// DisableWakeOnRelease turns off the hand-off of released locks to
	// waiting Lockers (core.WithWakeOnRelease(false)). Default: false,
	// hand-off on.
	DisableWakeOnRelease bool

	// Username and Password authenticate the module's clients (Redis
	// ACL user and password; Password alone for requirepass). Default:
	// none.
	Username, Password string

	// TLS makes the module's clients connect with TLS, using TLSConfig, or
	// a configuration with TLS 1.2 or later and the server name taken from
	// each address when TLSConfig is nil. Default: false, plain TCP.
	TLS bool

	// TLSConfig is the TLS configuration of the module's clients; setting
	// it implies TLS. It cannot come from the environment. Default: nil.
	TLSConfig *tls.Config

	// TolerateDown is how many nodes may be unreachable when the app
	// starts: start-up fails if more are, or if fewer than a quorum answer.
	// Default: 0, every node must answer.
	TolerateDown int

	// PingTimeout bounds the start-up check of the nodes (one EVALSHA on
	// each, in parallel; see New). Default: 2 s (DefaultPingTimeout).
	PingTimeout time.Duration
}

// namer names a Config field in an error: as a Go field or as the
// environment variable it came from.
type namer func(field string) string

func fieldName(field string) string { return "Config." + field }

// The environment variable suffix of each field, in the order of Config.
var envNames = map[string]string{
	"Driver":               "DRIVER",
	"Addrs":                "ADDRS",
	"Cluster":              "CLUSTER",
	"Strategy":             "STRATEGY",
	"StopAtQuorum":         "STOP_AT_QUORUM",
	"TTL":                  "TTL",
	"Tries":                "TRIES",
	"RetryMin":             "RETRY_MIN",
	"RetryMax":             "RETRY_MAX",
	"NodeTimeout":          "NODE_TIMEOUT",
	"Quorum":               "QUORUM",
	"KeyPrefix":            "KEY_PREFIX",
	"KeepAlive":            "KEEP_ALIVE",
	"MaxHold":              "MAX_HOLD",
	"Fencing":              "FENCING",
	"RestartGuard":         "RESTART_GUARD",
	"DisableRestartGuard":  "RESTART_GUARD_OFF",
	"AdoptNodes":           "ADOPT_NODES",
	"DisableWakeOnRelease": "WAKE_ON_RELEASE",
	"Username":             "USERNAME",
	"Password":             "PASSWORD",
	"TLS":                  "TLS",
	"TolerateDown":         "TOLERATE_DOWN",
	"PingTimeout":          "PING_TIMEOUT",
}

func envNamer(prefix string) namer {
	return func(field string) string { return prefix + "_" + envNames[field] }
}

// driver returns the normalised driver name, with its default.
func (c *Config) driver() string {
	d := strings.ToLower(strings.TrimSpace(c.Driver))
	if d == "" {
		return DefaultDriver
	}
	return d
}

// strategy returns the normalised strategy name; "" means core's default.
func (c *Config) strategy() string {
	return strings.ToLower(strings.TrimSpace(c.Strategy))
}

func (c *Config) pingTimeout() time.Duration {
	if c.PingTimeout == 0 {
		return DefaultPingTimeout
	}
	return c.PingTimeout
}

// validate checks what core.New does not: the fields this package
// interprets. Core validates the rest when the Locker is built.
func (c *Config) validate(name namer) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{name(field)}, args...)...))
	}
	switch c.driver() {
	case DriverGoRedis, DriverRueidis:
	case DriverRedigo:
		if c.Cluster {
			bad("Cluster", "redigo has no Redis Cluster client; use driver goredis or rueidis for a cluster")
		}
	default:
		bad("Driver", "unknown driver %q: want goredis, redigo or rueidis", c.Driver)
	}
	switch c.strategy() {
	case "", StrategyParallel, StrategySequential, StrategyFailFast:
	default:
		bad("Strategy", "unknown strategy %q: want parallel, sequential or failfast", c.Strategy)
	}
	for i, a := range c.Addrs {
		if strings.TrimSpace(a) == "" {
			bad("Addrs", "address %d is empty", i)
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"TTL", c.TTL}, {"RetryMin", c.RetryMin}, {"RetryMax", c.RetryMax}, {"NodeTimeout", c.NodeTimeout},
		{"KeepAlive", c.KeepAlive}, {"MaxHold", c.MaxHold}, {"PingTimeout", c.PingTimeout}, {"RestartGuard", c.RestartGuard},
	} {
		if d.v < 0 {
			bad(d.field, "%v is negative", d.v)
		}
	}
	if c.DisableRestartGuard && c.RestartGuard > 0 {
		bad("RestartGuard", "is set while %s turns the guard off", name("DisableRestartGuard"))
	}
	if c.RetryMax > 0 && c.RetryMax < c.RetryMin {
		bad("RetryMax", "%v is less than the minimum retry delay %v (%s)", c.RetryMax, c.RetryMin, name("RetryMin"))
	}
	for _, n := range []struct {
		field string
		v     int
	}{{"Tries", c.Tries}, {"Quorum", c.Quorum}, {"TolerateDown", c.TolerateDown}} {
		if n.v < 0 {
			bad(n.field, "%d is negative", n.v)
		}
	}
	return invalidConfig(errs...)
}

// invalidConfig joins a Config's faults into one error that matches
// core.ErrInvalidArgument (errors.Is) and whose message names each field;
// it is nil when there are none.
func invalidConfig(errs ...error) error {
	if err := errors.Join(errs...); err != nil {
		return configError{err}
	}
	return nil
}

// configError is a fault of a Config or of its environment variables.
type configError struct{ error }

// Is makes a configError match core.ErrInvalidArgument.
func (configError) Is(target error) bool { return target == core.ErrInvalidArgument }

// Unwrap returns the faults.
func (e configError) Unwrap() error { return e.error }

// coreOptions turns the fields that are core options into core options;
// zero fields give none, so core's defaults apply.
func (c *Config) coreOptions() []core.Option {
	var opts []core.Option
	if c.TTL > 0 {
		opts = append(opts, core.WithTTL(c.TTL))
	}
	if c.Tries > 0 {
		opts = append(opts, core.WithTries(c.Tries))
	}
	if c.RetryMin > 0 || c.RetryMax > 0 {
		lo, hi := c.RetryMin, c.RetryMax
		if lo == 0 {
			lo = min(core.DefaultRetryMin, hi)
		}
		if hi == 0 {
			hi = max(core.DefaultRetryMax, lo)
		}
		opts = append(opts, core.WithRetryDelay(core.JitterDelay(lo, hi)))
	}
	if c.NodeTimeout > 0 {
		opts = append(opts, core.WithNodeTimeout(c.NodeTimeout))
	}
	if c.Quorum > 0 {
		opts = append(opts, core.WithQuorum(c.Quorum))
	}
	if c.KeyPrefix != "" {
		opts = append(opts, core.WithKeyPrefix(c.KeyPrefix))
	}
	if c.KeepAlive > 0 {
		opts = append(opts, core.WithKeepAlive(c.KeepAlive))
	}
	if c.MaxHold > 0 {
		opts = append(opts, core.WithMaxHold(c.MaxHold))
	}
	if c.Fencing {
		opts = append(opts, core.WithFencing())
	}
	if c.DisableWakeOnRelease {
		opts = append(opts, core.WithWakeOnRelease(false))
	}
	switch {
	case c.DisableRestartGuard:
		opts = append(opts, core.WithoutRestartGuard())
	case c.RestartGuard > 0:
		opts = append(opts, core.WithRestartGuard(c.RestartGuard))
	}
	var sopts []strategies.Option
	if c.StopAtQuorum {
		sopts = append(sopts, strategies.StopAtQuorum())
	}
	switch c.strategy() {
	case StrategySequential:
		opts = append(opts, core.WithStrategy(strategies.Sequential(sopts...)))
	case StrategyFailFast:
		opts = append(opts, core.WithStrategy(strategies.FailFast(sopts...)))
	default:
		if len(sopts) > 0 {
			opts = append(opts, core.WithStrategy(strategies.Parallel(sopts...)))
		}
	}
	return opts
}

// ConfigFromEnv reads a Config from environment variables named prefix,
// an underscore and the field's name (DefaultEnvPrefix, "QUORUMLOCK", when
// prefix is empty; a trailing underscore in prefix is dropped):
//
//	QUORUMLOCK_DRIVER           goredis | redigo | rueidis
//	QUORUMLOCK_ADDRS            host:port,host:port,... (comma-separated)
//	QUORUMLOCK_CLUSTER          bool: ADDRS are one Redis Cluster
//	QUORUMLOCK_STRATEGY         parallel | sequential | failfast
//	QUORUMLOCK_STOP_AT_QUORUM   bool
//	QUORUMLOCK_TTL              Go duration, such as 10s
//	QUORUMLOCK_TRIES            integer
//	QUORUMLOCK_RETRY_MIN        Go duration
//	QUORUMLOCK_RETRY_MAX        Go duration
//	QUORUMLOCK_NODE_TIMEOUT     Go duration
//	QUORUMLOCK_QUORUM           integer, 0 for a majority
//	QUORUMLOCK_KEY_PREFIX       string
//	QUORUMLOCK_KEEP_ALIVE       Go duration
//	QUORUMLOCK_MAX_HOLD         Go duration
//	QUORUMLOCK_FENCING          bool
//	QUORUMLOCK_RESTART_GUARD    Go duration
//	QUORUMLOCK_RESTART_GUARD_OFF bool (sets DisableRestartGuard)
//	QUORUMLOCK_ADOPT_NODES      bool
//	QUORUMLOCK_WAKE_ON_RELEASE  bool (false sets DisableWakeOnRelease)
//	QUORUMLOCK_USERNAME         string
//	QUORUMLOCK_PASSWORD         string
//	QUORUMLOCK_TLS              bool
//	QUORUMLOCK_TOLERATE_DOWN    integer
//	QUORUMLOCK_PING_TIMEOUT     Go duration
//
// Booleans are those of strconv.ParseBool (1, t, true, 0, f, false, ...).
// A variable that is unset or empty leaves its field zero, that is, at its
// default. A value that does not parse, or that the field cannot take (an
// unknown driver, a negative duration), is an error naming the variable;
// all bad variables are reported at once. Whether the whole makes a valid
// Locker (a TTL longer than the node timeout, a possible quorum) is checked
// when the Locker is built.
func ConfigFromEnv(prefix string) (Config, error) {
	prefix = strings.TrimSuffix(prefix, "_")
	if prefix == "" {
		prefix = DefaultEnvPrefix
	}
	name := envNamer(prefix)
	var c Config
	var errs []error
	get := func(field string) (string, string, bool) {
		v := strings.TrimSpace(os.Getenv(name(field)))
		return name(field), v, v != ""
	}
	str := func(field string, dst *string) {
		if _, v, ok := get(field); ok {
			*dst = v
		}
	}
	boolean := func(field string, dst *bool) {
		if n, v, ok := get(field); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a boolean (want true or false)", n, v))
				return
			}
			*dst = b
		}
	}
	integer := func(field string, dst *int) {
		if n, v, ok := get(field); ok {
			i, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not an integer", n, v))
				return
			}
			*dst = i
		}
	}
	duration := func(field string, dst *time.Duration) {
		if n, v, ok := get(field); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a duration (want a Go duration such as 10s or 50ms)", n, v))
				return
			}
			*dst = d
		}
	}

	str("Driver", &c.Driver)
	if _, v, ok := get("Addrs"); ok {
		for a := range strings.SplitSeq(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Addrs = append(c.Addrs, a)
			}
		}
	}
	boolean("Cluster", &c.Cluster)
	str("Strategy", &c.Strategy)
	boolean("StopAtQuorum", &c.StopAtQuorum)
	duration("TTL", &c.TTL)
	integer("Tries", &c.Tries)
	duration("RetryMin", &c.RetryMin)
	duration("RetryMax", &c.RetryMax)
	duration("NodeTimeout", &c.NodeTimeout)
	integer("Quorum", &c.Quorum)
	str("KeyPrefix", &c.KeyPrefix)
	duration("KeepAlive", &c.KeepAlive)
	duration("MaxHold", &c.MaxHold)
	boolean("Fencing", &c.Fencing)
	duration("RestartGuard", &c.RestartGuard)
	boolean("DisableRestartGuard", &c.DisableRestartGuard)
	boolean("AdoptNodes", &c.AdoptNodes)
	wake := true
	boolean("DisableWakeOnRelease", &wake)
	c.DisableWakeOnRelease = !wake
	str("Username", &c.Username)
	if n := name("Password"); os.Getenv(n) != "" {
		c.Password = os.Getenv(n) // as given: spaces may be part of it
	}
	boolean("TLS", &c.TLS)
	integer("TolerateDown", &c.TolerateDown)
	duration("PingTimeout", &c.PingTimeout)

	// A variable that did not parse left its field zero, which is valid.
	if err := c.validate(name); err != nil {
		errs = append(errs, err)
	}
	if err := invalidConfig(errs...); err != nil {
		return Config{}, fmt.Errorf("fxmodule: configuration from the environment: %w", err)
	}
	return c, nil
}
