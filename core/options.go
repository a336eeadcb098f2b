package core

import (
	"fmt"
	"github.com/quorumlock/quorumlock/core/driver"
	"math"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/strategies"
)

// Strategy decides how the attempts of one round run and when the round
// stops. It is defined in package strategies, which holds the built-in ones.
type Strategy = strategies.Strategy

// The defaults of New. Each option's documentation names the default it
// replaces.
const (
	// DefaultTTL is how long a lock lives on a node unless extended: the
	// Redlock specification's example value.
	DefaultTTL = 10 * time.Second
	// DefaultDriftFactor is the share of the TTL set aside for clock drift
	// between the client and the nodes.
	DefaultDriftFactor = 0.01
	// DriftAllowance is added to TTL x drift factor to cover the
	// millisecond resolution of PX expiry, as the specification says.
	DriftAllowance = 2 * time.Millisecond
	// DefaultNodeTimeout bounds each node's answer: the upper end of the
	// specification's 5-50 ms for a 10 s TTL, so one dead node cannot stall
	// an acquisition.
	DefaultNodeTimeout = 50 * time.Millisecond
	// DefaultTries is how many rounds Acquire makes before it gives up.
	DefaultTries = 32
	// DefaultRetryMin and DefaultRetryMax bound the random delay between
	// two rounds of Acquire.
	DefaultRetryMin = 50 * time.Millisecond
	DefaultRetryMax = 250 * time.Millisecond
	// MinRetryDelay is the floor core puts under any retry delay, so that no
	// policy can make Acquire spin.
	MinRetryDelay = time.Millisecond
	// DefaultKeepAliveDivisor sets the default keep-alive interval: a
	// kept-alive lock is extended every TTL / DefaultKeepAliveDivisor, so
	// that about two thirds of its validity are left when the extension
	// starts, time for several retries if nodes fail.
	DefaultKeepAliveDivisor = 3
)

// maxGuard bounds the restart guard's max TTL: ages are milliseconds in a
// Lua number (a double), exact far beyond this.
const maxGuard = 100 * 365 * 24 * time.Hour

// Option configures a Locker. Options are applied in order by New, which
// then validates the result as a whole.
type Option interface {
	apply(*options)
	// String shows the option as written, for logs and comparison.
	String() string
}

type options struct {
	ttl         time.Duration
	quorum      int
	quorumSet   bool // false: N/2+1
	strategy    Strategy
	tries       int
	retry       RetryPolicy
	driftFactor float64
	nodeTimeout time.Duration
	keyPrefix   string
	clock       driver.Clock

	keepAlive      time.Duration // 0: TTL / DefaultKeepAliveDivisor
	keepAliveRetry RetryPolicy   // nil: JitterDelay(TTL/20, TTL/10)
	keepAliveErr   error         // why KeepAlive cannot work with these options
	maxHold        time.Duration // 0: no limit
	fencing        bool
	wake           bool
	observers      []Observer
	guard          time.Duration // restart guard's max TTL; 0: off
	guardSet       bool          // false: the default (on, max TTL = TTL, for N >= 3)
}

func defaultOptions() options {
	return options{
		ttl:         DefaultTTL,
		strategy:    strategies.Parallel(),
		tries:       DefaultTries,
		retry:       JitterDelay(DefaultRetryMin, DefaultRetryMax),
		driftFactor: DefaultDriftFactor,
		nodeTimeout: DefaultNodeTimeout,
		clock:       driver.SystemClock(),
		wake:        true,
	}
}

type optionFunc struct {
	fn   func(*options)
	name string
}

func (o optionFunc) apply(opts *options) { o.fn(opts) }
func (o optionFunc) String() string      { return o.name }

// WithTTL sets how long a lock lives on each node unless extended. It is
// truncated to whole milliseconds (the unit of PX) and must exceed the drift
// allowance (TTL x drift factor + 2 ms) and the node timeout.
// Default: DefaultTTL (10 s).
func WithTTL(ttl time.Duration) Option {
	return optionFunc{func(o *options) { o.ttl = ttl }, "WithTTL(" + ttl.String() + ")"}
}

// WithQuorum sets how many nodes must grant a lock. It must be more than
// half the nodes and at most all of them: a smaller quorum would let two
// owners hold the lock at once, and New refuses it.
// Default: N/2+1.
func WithQuorum(q int) Option {
	return optionFunc{func(o *options) { o.quorum, o.quorumSet = q, true }, "WithQuorum(" + strconv.Itoa(q) + ")"}
}

// WithStrategy sets how the node attempts of a round run and when a round
// stops; see package strategies.
// Default: strategies.Parallel(), greedy.
func WithStrategy(s Strategy) Option {
	name := "WithStrategy(<nil>)"
	if !driver.IsNil(s) {
		name = "WithStrategy(" + s.String() + ")"
	}
	return optionFunc{func(o *options) { o.strategy = s }, name}
}

// WithTries sets how many rounds Acquire makes at most; TryAcquire always
// makes one. It must be at least 1; to wait as long as a context allows, give
// a large number and a context with a deadline. The quick follow-ups of a
// round a release notice started, while that release is still reaching the
// other nodes (see the package doc's fast hand-off), are not counted.
// Default: DefaultTries (32).
func WithTries(n int) Option {
	return optionFunc{func(o *options) { o.tries = n }, "WithTries(" + strconv.Itoa(n) + ")"}
}

// WithRetryDelay sets the delay between two rounds of Acquire. Delays are
// raised to at least MinRetryDelay.
// Default: JitterDelay(DefaultRetryMin, DefaultRetryMax), 50-250 ms.
func WithRetryDelay(p RetryPolicy) Option {
	name := "WithRetryDelay(<nil>)"
	if p != nil {
		name = "WithRetryDelay(...)"
	}
	return optionFunc{func(o *options) { o.retry = p }, name}
}

// WithDriftFactor sets the share of the TTL set aside for clock drift:
// validity = TTL - elapsed - (TTL x factor + 2 ms). It must be in [0, 1).
// Default: DefaultDriftFactor (0.01).
func WithDriftFactor(f float64) Option {
	return optionFunc{func(o *options) { o.driftFactor = f }, "WithDriftFactor(" + strconv.FormatFloat(f, 'g', -1, 64) + ")"}
}

// WithNodeTimeout bounds each call to a node: an acquire or extend attempt,
// or a release. It must be positive and less than the TTL minus the drift
// allowance. Keep it small against the TTL (the specification suggests 5-50
// ms for a 10 s TTL), but above the nodes' worst round trip.
// Default: DefaultNodeTimeout (50 ms).
func WithNodeTimeout(d time.Duration) Option {
	return optionFunc{func(o *options) { o.nodeTimeout = d }, "WithNodeTimeout(" + d.String() + ")"}
}

// WithKeyPrefix puts a prefix before every key given to the Locker, to keep
// the lock keys apart from other data. Lock.Key returns the key without it.
// Default: no prefix, so a key is stored as given, as other Redlock clients
// (redsync among them) store it, and their locks exclude each other.
func WithKeyPrefix(prefix string) Option {
	return optionFunc{func(o *options) { o.keyPrefix = prefix }, "WithKeyPrefix(" + strconv.Quote(prefix) + ")"}
}

// WithClock sets the clock used for validity and retry waits.
// Default: SystemClock().
func WithClock(c driver.Clock) Option {
	return optionFunc{func(o *options) { o.clock = c }, "WithClock(...)"}
}

// WithKeepAlive sets how often a kept-alive lock (Lock.KeepAlive,
// Locker.Do) is extended: each extension starts this long after the start
// of the round that last set its validity. Kept-alive locks whose
// extensions fall due within half an interval of each other are extended
// together, in one round trip per node when the nodes are Batchers. It
// must be positive and leave room for a round: interval + node timeout <
// TTL - drift.
// Default: TTL / DefaultKeepAliveDivisor (3.33 s for the default TTL).
func WithKeepAlive(interval time.Duration) Option {
	return optionFunc{func(o *options) { o.keepAlive = interval }, "WithKeepAlive(" + interval.String() + ")"}
}

// WithKeepAliveRetry sets the delay before a kept-alive lock's extension
// is tried again after a failure that leaves the lock valid (too many
// nodes failed to answer: ErrUnavailable). Retries go on while validity
// remains; once it runs out, the lock is lost.
// A nil policy keeps the default.
// Default: JitterDelay(TTL/20, TTL/10), 0.5-1 s for the default TTL.
func WithKeepAliveRetry(p RetryPolicy) Option {
	name := "WithKeepAliveRetry(<nil>)"
	if p != nil {
		name = "WithKeepAliveRetry(...)"
	}
	return optionFunc{func(o *options) { o.keepAliveRetry = p }, name}
}

// WithMaxHold bounds how long the keep-alive machinery keeps a lock: no
// extension starts once d has passed since the lock was acquired, so the
// lock ends with its validity at most d + TTL after it was taken, and Done
// fires with a cause matching ErrMaxHold. The Redlock specification asks
// for this bound for liveness: a holder stuck in a loop must not keep a
// resource forever. It must not be negative; 0 means no limit.
// Default: 0, no limit (Do's fn decides how long it holds).
func WithMaxHold(d time.Duration) Option {
	return optionFunc{func(o *options) { o.maxHold = d }, "WithMaxHold(" + d.String() + ")"}
}

// WithFencing turns fencing tokens on: every acquisition returns a number,
// Lock.Token, that is larger than the token of any earlier acquisition of
// the same key, so that a storage layer can refuse a write from a stale
// holder. It costs a script instead of SET NX on acquisition, a counter key
// per lock key on each node (FenceKey; it never expires), and a second round
// when the nodes' counters disagree. See Lock.Token for what the token
// guarantees and assumes.
// Default: off; Lock.Token returns 0.
func WithFencing() Option {
	return optionFunc{func(o *options) { o.fencing = true }, "WithFencing()"}
}

// WithObserver adds o to the Observers of the Locker's acquisitions,
// extensions, releases and losses (see Observer); given several times, the
// Observers see every event in the order they were given. A nil o adds
// nothing.
// Default: none; no event is built.
func WithObserver(o Observer) Option {
	return optionFunc{func(opts *options) {
		if !driver.IsNil(o) {
			opts.observers = append(opts.observers, o)
		}
	}, fmt.Sprintf("WithObserver(%T)", o)}
}

// WithWakeOnRelease sets whether Acquire, after a round lost to another
// holder, queues in the key's wait queue on the herald node (when it is a
// Watcher) and takes the lock as soon as a release hands it over, instead
// of sleeping out its retry delay (see the package doc's Fast hand-off).
// The retry delay still bounds every wait: it is the fallback for a herald
// without the capability or down, and for locks that expire instead of
// being released. With it off, the Locker's own releases still hand locks
// to the waiters of other Lockers.
// Default: on.
func WithWakeOnRelease(on bool) Option {
	return optionFunc{func(o *options) { o.wake = on }, "WithWakeOnRelease(" + strconv.FormatBool(on) + ")"}
}

// WithRestartGuard turns the restart guard on, with maxTTL the longest
// TTL that any Locker uses on these servers. A node whose data is younger
// than maxTTL plus the drift allowance (a server restarted without
// persistence, or a fresh one) does not vote, so it cannot grant a lock it
// forgot: its outcome is OutcomeFailed with a *RestartGuardError, and
// Acquire waits for it within its context when the quorum needs it. A
// server that has been up longer votes on first use. The guard does not
// apply to sharded nodes (Redis Clusters). maxTTL must be at least the
// TTL; every Locker on these servers should use the same one.
// Default: on with maxTTL = the TTL for three nodes or more, off for one
// or two. How it works and what it cannot see: docs/restart-guard.md.
func WithRestartGuard(maxTTL time.Duration) Option {
	return optionFunc{func(o *options) { o.guard, o.guardSet = maxTTL, true }, "WithRestartGuard(" + maxTTL.String() + ")"}
}

// WithoutRestartGuard turns the restart guard off: acquisition is a plain
// SET NX PX, and a node that restarted without persistence counts at once,
// as in the Redlock specification, which then asks operators to keep such
// a node down for a max TTL. See WithRestartGuard.
func WithoutRestartGuard() Option {
	return optionFunc{func(o *options) { o.guard, o.guardSet = 0, true }, "WithoutRestartGuard()"}
}

// drift is the time set aside for clock drift for one TTL.
func (o *options) drift() time.Duration { return o.driftFor(o.ttl) }

// driftFor is the time set aside for clock drift over d.
func (o *options) driftFor(d time.Duration) time.Duration {
	return time.Duration(float64(d)*o.driftFactor) + DriftAllowance
}

func (o *options) validate(n int) error {
	if o.ttl < time.Millisecond {
		return invalid("TTL %v must be at least 1ms (WithTTL)", o.ttl)
	}
	if math.IsNaN(o.driftFactor) || o.driftFactor < 0 || o.driftFactor >= 1 {
		return invalid("drift factor %v must be in [0, 1) (WithDriftFactor)", o.driftFactor)
	}
	given := o.ttl.String()
	if o.ttl = o.ttl.Truncate(time.Millisecond); given != o.ttl.String() {
		given += " (" + o.ttl.String() + " in whole milliseconds, the unit of PX)"
	}
	if drift := o.drift(); o.ttl <= drift {
		return invalid("TTL %s leaves no validity after the drift allowance of %v (WithTTL)", given, drift)
	}
	if o.nodeTimeout <= 0 {
		return invalid("node timeout %v must be positive (WithNodeTimeout)", o.nodeTimeout)
	}
	if limit := o.ttl - o.drift(); o.nodeTimeout >= limit {
		return invalid("node timeout %v must be less than TTL - drift = %v (WithNodeTimeout)", o.nodeTimeout, limit)
	}
	if !o.quorumSet {
		o.quorum = n/2 + 1
	}
	if o.quorum <= n/2 || o.quorum > n {
		return invalid("quorum %d is impossible for %d nodes: it must be in [%d, %d] (WithQuorum)", o.quorum, n, n/2+1, n)
	}
	if driver.IsNil(o.strategy) {
		return invalid("strategy is nil (WithStrategy)")
	}
	if o.tries < 1 {
		return invalid("tries %d must be at least 1 (WithTries)", o.tries)
	}
	if o.retry == nil {
		return invalid("retry policy is nil (WithRetryDelay)")
	}
	if driver.IsNil(o.clock) {
		return invalid("clock is nil (WithClock)")
	}
	limit := o.ttl - o.drift() - o.nodeTimeout
	switch {
	case o.keepAlive < 0:
		return invalid("keep-alive interval %v must be positive (WithKeepAlive)", o.keepAlive)
	case o.keepAlive > 0 && o.keepAlive >= limit:
		return invalid("keep-alive interval %v must be less than TTL - drift - node timeout = %v (WithKeepAlive)", o.keepAlive, limit)
	case o.keepAlive == 0:
		// The default must not make New refuse a configuration that never
		// keeps locks alive; KeepAlive refuses it instead.
		o.keepAlive = o.ttl / DefaultKeepAliveDivisor
		if o.keepAlive >= limit {
			o.keepAliveErr = invalid("TTL %v leaves no room to keep a lock alive: TTL - drift - node timeout = %v must exceed the keep-alive interval %v (WithTTL, WithNodeTimeout, WithKeepAlive)",
				o.ttl, limit, o.keepAlive)
		}
	}
	if o.keepAliveRetry == nil {
		o.keepAliveRetry = JitterDelay(o.ttl/20, o.ttl/10)
	}
	if o.maxHold < 0 {
		return invalid("maximum hold time %v must not be negative (WithMaxHold)", o.maxHold)
	}
	switch {
	case !o.guardSet && n >= 3:
		o.guard = o.ttl
	case !o.guardSet:
		o.guard = 0
	case o.guard < 0:
		return invalid("restart guard max TTL %v must be positive (WithRestartGuard; WithoutRestartGuard turns it off)", o.guard)
	case o.guard > 0 && o.guard < o.ttl:
		return invalid("restart guard max TTL %v is shorter than the TTL %v: a restarted node would count again while locks it forgot still live elsewhere (WithRestartGuard)", o.guard, o.ttl)
	case o.guard > maxGuard:
		return invalid("restart guard max TTL %v is longer than %v (WithRestartGuard)", o.guard, maxGuard)
	}
	return nil
}

// String summarises the effective configuration.
func (o *options) String() string {
	return fmt.Sprintf("ttl=%v quorum=%d strategy=%s tries=%d drift=%v node-timeout=%v keep-alive=%v fencing=%t wake=%t restart-guard=%v",
		o.ttl, o.quorum, o.strategy, o.tries, o.drift(), o.nodeTimeout, o.keepAlive, o.fencing, o.wake, o.guard)
}
