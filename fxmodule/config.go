package fxmodule

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"
)

// Driver names, the values of Config.Driver.
const (
	DriverGoRedis = "goredis" // github.com/redis/go-redis/v9
	DriverRedigo  = "redigo"  // github.com/gomodule/redigo
	DriverRueidis = "rueidis" // github.com/redis/rueidis
	DriverValkey  = "valkey"  // github.com/valkey-io/valkey-go
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
	// "goredis", "redigo", "rueidis" or "valkey". Default: "rueidis"
	// (DefaultDriver).
	// Ignored when the app contributes nodes to the NodesGroup group.
	Driver string `yaml:"driver" json:"driver,omitempty"`

	// Addrs are the servers, "host:port". Without Cluster, each is an
	// independent Redis master and one Redlock node. Required unless the
	// app contributes nodes to the NodesGroup group, which then replace
	// them.
	Addrs []string `yaml:"addrs" json:"addrs,omitempty"`

	// Cluster makes Addrs the seed addresses of ONE Redis Cluster, which is
	// one Redlock node (its masters are not independent voters). goredis
	// rueidis and valkey only: redigo has no cluster client. Default:
	// false.
	Cluster bool `yaml:"cluster" json:"cluster,omitempty"`

	// Strategy is how a round asks the nodes: "parallel", "sequential" or
	// "failfast" (see package strategies). Default: "parallel", core's
	// default.
	Strategy string `yaml:"strategy" json:"strategy,omitempty"`

	// StopAtQuorum makes the strategy stop at the quorum-th vote instead
	// of asking every node (strategies.WithStopAtQuorum). Default: false
	// (greedy).
	StopAtQuorum bool `yaml:"stop_at_quorum" json:"stop_at_quorum,omitempty"`

	// TTL is how long a lock lives on a node unless extended
	// (core.WithTTL). Default: 10 s (core.DefaultTTL).
	TTL time.Duration `yaml:"ttl" json:"ttl,omitempty"`

	// Tries is how many rounds Acquire makes at most (core.WithTries).
	// Default: 32 (core.DefaultTries).
	Tries int `yaml:"tries" json:"tries,omitempty"`

	// RetryMin and RetryMax bound the random delay between two rounds of
	// Acquire (core.WithRetryDelay with strategies.JitterDelay). Defaults: 50 ms
	// (core.DefaultRetryMin) and the larger of 250 ms
	// (core.DefaultRetryMax) and RetryMin.
	RetryMin time.Duration `yaml:"retry_min" json:"retry_min,omitempty"`
	RetryMax time.Duration `yaml:"retry_max" json:"retry_max,omitempty"`

	// NodeTimeout bounds every call to a node (core.WithNodeTimeout).
	// Default: 50 ms (core.DefaultNodeTimeout).
	NodeTimeout time.Duration `yaml:"node_timeout" json:"node_timeout,omitempty"`

	// Quorum is how many nodes must grant a lock (core.WithQuorum).
	// Default: 0, a majority (N/2+1).
	Quorum int `yaml:"quorum" json:"quorum,omitempty"`

	// KeyPrefix is put before every lock key (core.WithKeyPrefix).
	// Default: none.
	KeyPrefix string `yaml:"key_prefix" json:"key_prefix,omitempty"`

	// KeepAlive is how often a kept-alive lock is extended
	// (core.WithKeepAlive). Default: TTL/3.
	KeepAlive time.Duration `yaml:"keep_alive" json:"keep_alive,omitempty"`

	// MaxHold bounds how long a lock is kept alive (core.WithMaxHold).
	// Default: 0, no limit.
	MaxHold time.Duration `yaml:"max_hold" json:"max_hold,omitempty"`

	// Fencing turns fencing tokens on (core.WithFencing). Default: off.
	Fencing bool `yaml:"fencing" json:"fencing,omitempty"`

	// RestartGuard is the restart guard's max TTL (core.WithRestartGuard):
	// the longest TTL of any Locker on these servers. Default: 0, core's
	// default (on, with the TTL, for three nodes or more).
	RestartGuard time.Duration `yaml:"restart_guard" json:"restart_guard,omitempty"`

	// DisableRestartGuard turns the restart guard off
	// (core.WithRestartGuard(0)). Default: false.
	DisableRestartGuard bool `yaml:"disable_restart_guard" json:"disable_restart_guard,omitempty"`

	// DisableWakeOnRelease turns off the hand-off of released locks to
	// waiting Lockers (core.WithWakeOnRelease(false)). Default: false,
	// hand-off on.
	DisableWakeOnRelease bool `yaml:"disable_wake_on_release" json:"disable_wake_on_release,omitempty"`

	// Username and Password authenticate the module's clients (Redis
	// ACL user and password; Password alone for requirepass). Default:
	// none.
	Username string `yaml:"username" json:"username,omitempty"`
	Password string `yaml:"password" json:"password,omitempty"`

	// TLS makes the module's clients connect with TLS, using TLSConfig, or
	// a configuration with TLS 1.2 or later and the server name taken from
	// each address when TLSConfig is nil. Default: false, plain TCP.
	TLS bool `yaml:"tls" json:"tls,omitempty"`

	// TLSConfig is the TLS configuration of the module's clients; setting
	// it implies TLS. It cannot come from the environment. Default: nil.
	TLSConfig *tls.Config `yaml:"-" json:"-"`

	// TolerateDown is how many nodes may be unreachable when the app
	// starts: start-up fails if more are, or if fewer than a quorum answer.
	// Default: 0, which means N − quorum, as many as Redlock tolerates.
	TolerateDown int `yaml:"tolerate_down" json:"tolerate_down,omitempty"`

	// RequireAllNodes makes start-up fail unless every node answers,
	// whatever TolerateDown says. Default: false.
	RequireAllNodes bool `yaml:"require_all_nodes" json:"require_all_nodes,omitempty"`

	// PingTimeout bounds the start-up check of the nodes (one EVALSHA on
	// each, in parallel; see New). Default: 2 s (DefaultPingTimeout).
	PingTimeout time.Duration `yaml:"ping_timeout" json:"ping_timeout,omitempty"`
}

// namer names a Config field in an error: as a Go field or as the
// environment variable it came from.
type namer func(field string) string

func fieldName(field string) string { return "Config." + field }

// envName is the environment variable of the field whose yaml name is
// tag: prefix, an underscore and the tag in upper case.
func envName(prefix, tag string) string { return prefix + "_" + strings.ToUpper(tag) }

// fieldTags maps each Config field that has a yaml name to it.
var fieldTags = func() map[string]string {
	tags := make(map[string]string)
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Config]()) {
		if tag := f.Tag.Get("yaml"); tag != "" && tag != "-" {
			tags[f.Name] = tag
		}
	}
	return tags
}()

func envNamer(prefix string) namer {
	return func(field string) string { return envName(prefix, fieldTags[field]) }
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

// tolerateDown is how many of n nodes may be down at start, for a Locker
// that needs quorum of them.
func (c *Config) tolerateDown(n, quorum int) int {
	switch {
	case c.RequireAllNodes:
		return 0
	case c.TolerateDown > 0:
		return c.TolerateDown
	}
	return n - quorum
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
	case DriverGoRedis, DriverRueidis, DriverValkey:
	case DriverRedigo:
		if c.Cluster {
			bad("Cluster", "redigo has no Redis Cluster client; use driver goredis, rueidis or valkey for a cluster")
		}
	default:
		bad("Driver", "unknown driver %q: want goredis, redigo, rueidis or valkey", c.Driver)
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
		opts = append(opts, c.retryDelay())
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
		opts = append(opts, core.WithFencing(true))
	}
	if c.DisableWakeOnRelease {
		opts = append(opts, core.WithWakeOnRelease(false))
	}
	switch {
	case c.DisableRestartGuard:
		opts = append(opts, core.WithRestartGuard(0))
	case c.RestartGuard > 0:
		opts = append(opts, core.WithRestartGuard(c.RestartGuard))
	}
	if o := c.strategyOption(); o != nil {
		opts = append(opts, o)
	}
	return opts
}

// retryDelay is the retry delay of RetryMin and RetryMax, at least one of
// them set: a bound left zero takes core's default, kept on its side of
// the other bound.
func (c *Config) retryDelay() core.Option {
	lo, hi := c.RetryMin, c.RetryMax
	if lo == 0 {
		lo = min(core.DefaultRetryMin, hi)
	}
	if hi == 0 {
		hi = max(core.DefaultRetryMax, lo)
	}
	return core.WithRetryDelay(strategies.JitterDelay(lo, hi))
}

// strategyOption is the strategy of Strategy and StopAtQuorum, or nil when
// they ask for core's default (parallel, not stopping at a quorum).
func (c *Config) strategyOption() core.Option {
	var sopts []strategies.Option
	if c.StopAtQuorum {
		sopts = append(sopts, strategies.WithStopAtQuorum(true))
	}
	switch c.strategy() {
	case StrategySequential:
		return core.WithStrategy(strategies.Sequential(sopts...))
	case StrategyFailFast:
		return core.WithStrategy(strategies.FailFast(sopts...))
	}
	if len(sopts) > 0 {
		return core.WithStrategy(strategies.Parallel(sopts...))
	}
	return nil
}

// ConfigFromEnv reads a Config from environment variables: prefix (default
// DefaultEnvPrefix, "QUORUMLOCK"; a trailing underscore is dropped), an
// underscore, and the field's name in upper snake case, which is its yaml
// name in upper case: QUORUMLOCK_ADDRS, QUORUMLOCK_TTL,
// QUORUMLOCK_DISABLE_RESTART_GUARD, QUORUMLOCK_TOLERATE_DOWN, and so on
// for every field but TLSConfig. Values: Addrs comma-separated; durations
// as Go durations (10s, 50ms); booleans as strconv.ParseBool reads them;
// integers in decimal.
//
// A variable that is unset or empty leaves its field zero, that is, at its
// default. A value that does not parse, or that the field cannot take (an
// unknown driver, a negative duration), is an error naming the variable;
// all bad variables are reported at once, and the error matches
// core.ErrInvalidArgument. Whether the whole makes a valid Locker (a TTL
// longer than the node timeout, a possible quorum) is checked when the
// Locker is built.
func ConfigFromEnv(prefix string) (Config, error) {
	prefix = strings.TrimSuffix(prefix, "_")
	if prefix == "" {
		prefix = DefaultEnvPrefix
	}
	var c Config
	var errs []error
	if v := os.Getenv(prefix + "_ADOPT_NODES"); v != "" {
		errs = append(errs, fmt.Errorf("%s_ADOPT_NODES is no longer read: left set, it adopted the servers at every start, "+
			"which turns the restart guard off after a crash; adopt a fresh deployment once with core.Locker.Adopt "+
			"or redis-cli SET %s 0, and unset it", prefix, driver.BirthKey))
	}
	cv := reflect.ValueOf(&c).Elem()
	for _, f := range reflect.VisibleFields(cv.Type()) {
		tag, ok := fieldTags[f.Name]
		if !ok {
			continue
		}
		name := envName(prefix, tag)
		v := os.Getenv(name)
		if f.Name != "Password" { // spaces may be part of a password
			v = strings.TrimSpace(v)
		}
		if v == "" {
			continue
		}
		if err := setField(cv.FieldByIndex(f.Index), v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	// A variable that did not parse left its field zero, which is valid.
	if err := c.validate(envNamer(prefix)); err != nil {
		errs = append(errs, err)
	}
	if err := invalidConfig(errs...); err != nil {
		return Config{}, fmt.Errorf("fxmodule: configuration from the environment: %w", err)
	}
	return c, nil
}

// Set sets the field whose yaml name is name ("addrs", "ttl",
// "node_timeout"...; a dash counts as an underscore, so a command-line
// flag's name will do) from its text form, as ConfigFromEnv reads the
// field's variable: Addrs comma-separated, durations as Go durations,
// booleans as strconv.ParseBool reads them, integers in decimal. An
// unknown name (TLSConfig has none), or a value that does not parse, is an
// error matching core.ErrInvalidArgument. Whether the value suits the
// field (a negative TTL) is checked when the Locker is built.
func (c *Config) Set(name, value string) error {
	tag := strings.ReplaceAll(name, "-", "_")
	cv := reflect.ValueOf(c).Elem()
	for _, f := range reflect.VisibleFields(cv.Type()) {
		if t, ok := fieldTags[f.Name]; !ok || t != tag {
			continue
		}
		if err := setField(cv.FieldByIndex(f.Index), value); err != nil {
			return invalidConfig(fmt.Errorf("%s: %w", name, err))
		}
		return nil
	}
	return invalidConfig(fmt.Errorf("fxmodule: Config has no setting %q", name))
}

var durationType = reflect.TypeFor[time.Duration]()

// setField sets a Config field from its text form, as the environment
// gives it.
func setField(f reflect.Value, v string) error {
	switch {
	case f.Type() == durationType:
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration (want a Go duration such as 10s or 50ms)", v)
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		f.SetString(v)
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (want true or false)", v)
		}
		f.SetBool(b)
	case f.Kind() == reflect.Int:
		i, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		f.SetInt(int64(i))
	case f.Type() == reflect.TypeFor[[]string]():
		var list []string
		for a := range strings.SplitSeq(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				list = append(list, a)
			}
		}
		f.Set(reflect.ValueOf(list))
	default:
		return fmt.Errorf("fields of type %v cannot be set from text", f.Type())
	}
	return nil
}

// UnmarshalJSON reads a Config from a JSON object keyed by the fields'
// json names (the yaml names: "addrs", "ttl", "tolerate_down"...).
// Durations may be Go duration strings ("10s") or integer nanoseconds. An
// unknown key is an error, so that a misspelt setting is not ignored.
func (c *Config) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("fxmodule: Config: %w", err)
	}
	var out Config
	cv := reflect.ValueOf(&out).Elem()
	for _, f := range reflect.VisibleFields(cv.Type()) {
		tag := fieldTags[f.Name]
		msg, ok := raw[tag]
		if !ok {
			continue
		}
		delete(raw, tag)
		fv := cv.FieldByIndex(f.Index)
		var text string
		if f.Type == durationType && json.Unmarshal(msg, &text) == nil {
			if err := setField(fv, text); err != nil {
				return invalidConfig(fmt.Errorf("fxmodule: Config %q: %w", tag, err))
			}
			continue
		}
		if err := json.Unmarshal(msg, fv.Addr().Interface()); err != nil {
			return invalidConfig(fmt.Errorf("fxmodule: Config %q: %w", tag, err))
		}
	}
	if len(raw) > 0 {
		return invalidConfig(fmt.Errorf("fxmodule: Config: unknown fields %q", slices.Sorted(maps.Keys(raw))))
	}
	*c = out
	return nil
}
