package core

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"

	"github.com/quorumlock/quorumlock/strategies"
)

// The defaults of New.
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
	// specification's 5-50 ms for a 10 s TTL.
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
	// DefaultKeepAliveDivisor sets the default keep-alive interval, TTL /
	// DefaultKeepAliveDivisor: two thirds of the validity are left for
	// retries.
	DefaultKeepAliveDivisor = 3
	// DefaultAtRiskDivisor sets the default at-risk margin, TTL /
	// DefaultAtRiskDivisor: a lock at risk is announced with a fifth of
	// its TTL of validity left, the holder's time to stop.
	DefaultAtRiskDivisor = 5
)

// maxGuard bounds the restart guard's max TTL (ages are Lua doubles).
const maxGuard = 100 * 365 * 24 * time.Hour

// Option configures a Locker. New applies options in order, a later one
// overriding an earlier one of the same kind; a nil Option is skipped.
// New then validates the result as a whole. A nil value given to an
// option keeps its default.
type Option interface {
	apply(*options)
	// String shows the option as written, for logs and comparison
	// (functions elided).
	String() string
}

type options struct {
	ttl         time.Duration
	quorum      int
	quorumSet   bool // false: N/2+1
	strategy    strategies.Strategy
	tries       int
	retry       strategies.RetryPolicy
	driftFactor float64
	nodeTimeout time.Duration
	keyPrefix   string
	clock       driver.Clock

	keepAlive      time.Duration          // 0: TTL / DefaultKeepAliveDivisor
	keepAliveRetry strategies.RetryPolicy // JitterDelay(TTL/20, TTL/10)
	keepAliveErr   error                  // why KeepAlive cannot work with these options
	maxHold        time.Duration          // 0: no limit
	atRisk         time.Duration          // the at-risk margin
	atRiskSet      bool                   // false: TTL / DefaultAtRiskDivisor
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
		retry:       strategies.JitterDelay(DefaultRetryMin, DefaultRetryMax),
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
func WithStrategy(s strategies.Strategy) Option {
	if driver.IsNil(s) {
		return optionFunc{func(*options) {}, "WithStrategy(nil)"}
	}
	return optionFunc{func(o *options) { o.strategy = s }, "WithStrategy(" + s.String() + ")"}
}

// WithTries sets how many rounds Acquire makes at most; TryAcquire always
// makes one. It must be at least 1; to wait as long as a context allows, give
// a large number and a context with a deadline. Waits for young nodes and
// a hand-off's quick follow-ups are not counted (docs/handoff.md).
// Default: DefaultTries (32).
func WithTries(n int) Option {
	return optionFunc{func(o *options) { o.tries = n }, "WithTries(" + strconv.Itoa(n) + ")"}
}

// WithRetryDelay sets the delay between two rounds of Acquire. Delays are
// raised to at least MinRetryDelay.
// Default: strategies.JitterDelay(DefaultRetryMin, DefaultRetryMax), 50-250 ms.
func WithRetryDelay(p strategies.RetryPolicy) Option {
	if p == nil {
		return optionFunc{func(*options) {}, "WithRetryDelay(nil)"}
	}
	return optionFunc{func(o *options) { o.retry = p }, "WithRetryDelay(...)"}
}

// WithDriftFactor sets the share of the TTL set aside for clock drift:
// validity = TTL - elapsed - (TTL x factor + 2 ms). It must be in [0, 1).
// Default: DefaultDriftFactor (0.01).
func WithDriftFactor(f float64) Option {
	return optionFunc{func(o *options) { o.driftFactor = f }, "WithDriftFactor(" + strconv.FormatFloat(f, 'g', -1, 64) + ")"}
}

// WithNodeTimeout bounds each call to a node. It must be positive and less
// than the TTL minus the drift allowance; keep it small against the TTL
// but above the nodes' worst round trip.
// Default: DefaultNodeTimeout (50 ms).
func WithNodeTimeout(d time.Duration) Option {
	return optionFunc{func(o *options) { o.nodeTimeout = d }, "WithNodeTimeout(" + d.String() + ")"}
}

// WithKeyPrefix puts a prefix before every key given to the Locker, to keep
// the lock keys apart from other data. Lock.Key returns the key without it.
// Default: no prefix: keys are stored as given, as other Redlock clients
// (redsync among them) store them, so their locks exclude each other.
func WithKeyPrefix(prefix string) Option {
	return optionFunc{func(o *options) { o.keyPrefix = prefix }, "WithKeyPrefix(" + strconv.Quote(prefix) + ")"}
}

// WithKeepAlive sets how often a kept-alive lock (Lock.KeepAlive,
// Locker.Do) is extended: each extension starts this long after the start
// of the round that last set its validity. It must be positive and leave
// room for an extension to end before the lock is at risk: interval +
// node timeout < TTL - drift - at-risk margin (WithAtRiskMargin).
// Default: TTL / DefaultKeepAliveDivisor (3.33 s for the default TTL).
func WithKeepAlive(interval time.Duration) Option {
	return optionFunc{func(o *options) { o.keepAlive = interval }, "WithKeepAlive(" + interval.String() + ")"}
}

// WithMaxHold bounds how long the keep-alive keeps a lock: no extension
// starts once d has passed since it was acquired, so the lock ends with
// its validity at most d + TTL after it was taken, with a cause matching
// ErrMaxHold. It must not be negative; 0 means no limit.
// Default: 0, no limit.
func WithMaxHold(d time.Duration) Option {
	return optionFunc{func(o *options) { o.maxHold = d }, "WithMaxHold(" + d.String() + ")"}
}

// WithAtRiskMargin sets how much validity a lock has left when it is
// announced at risk: once an extension has failed (or the keep-alive
// stopped at WithMaxHold), the lock ends when less than d of validity is
// left, with a cause matching ErrLockAtRisk and ErrLockLost (Done, Err,
// Context, Do's context), so that its holder has d to stop. It must be
// positive and leave room for an extension: keep-alive interval + node
// timeout < TTL - drift - d.
// Default: TTL / DefaultAtRiskDivisor (2 s for the default TTL).
func WithAtRiskMargin(d time.Duration) Option {
	return optionFunc{func(o *options) { o.atRisk, o.atRiskSet = d, true }, "WithAtRiskMargin(" + d.String() + ")"}
}

// WithFencing turns fencing tokens on (Lock.Token). It costs a script
// instead of SET NX, a counter key per lock key on each node, which never
// expires, and a second round when the counters disagree. See
// docs/fencing.md.
// Default: off; Lock.Token returns 0.
func WithFencing(on bool) Option {
	return optionFunc{func(o *options) { o.fencing = on }, "WithFencing(" + strconv.FormatBool(on) + ")"}
}

// WithObserver adds o to the Locker's Observers, which see every event in
// the order they were given. A nil o adds nothing.
// Default: none; no event is built.
func WithObserver(o Observer) Option {
	return optionFunc{func(opts *options) {
		if !driver.IsNil(o) {
			opts.observers = append(opts.observers, o)
		}
	}, fmt.Sprintf("WithObserver(%T)", o)}
}

// WithWakeOnRelease sets whether Acquire, after a round lost to another
// holder, queues on the herald node and takes the lock as soon as a
// release hands it over, instead of sleeping out its retry delay; the
// retry delay stays the fallback (docs/handoff.md). With it off, the
// Locker's own releases still hand locks to other Lockers' waiters.
// Default: on.
func WithWakeOnRelease(on bool) Option {
	return optionFunc{func(o *options) { o.wake = on }, "WithWakeOnRelease(" + strconv.FormatBool(on) + ")"}
}

// WithRestartGuard sets the restart guard's max TTL: the longest TTL any
// Locker uses on these servers (at least this Locker's TTL). A node whose
// data is younger does not vote (ErrNodeRestarted), and Acquire waits for
// it within its context. 0 turns the guard off; Redis Clusters are never
// guarded. See docs/restart-guard.md.
// Default: the TTL for three nodes or more, off for one or two.
func WithRestartGuard(maxTTL time.Duration) Option {
	return optionFunc{func(o *options) { o.guard, o.guardSet = maxTTL, true }, "WithRestartGuard(" + maxTTL.String() + ")"}
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
	if o.tries < 1 {
		return invalid("tries %d must be at least 1 (WithTries)", o.tries)
	}
	return o.validateHolding(n)
}

// validateHolding checks the options of keeping locks: at-risk margin,
// keep-alive, maximum hold time and restart guard.
func (o *options) validateHolding(n int) error {
	if !o.atRiskSet {
		o.atRisk = o.ttl / DefaultAtRiskDivisor
	}
	if o.atRisk <= 0 || o.atRisk >= o.ttl-o.drift() {
		return invalid("at-risk margin %v must be positive and less than TTL - drift = %v (WithAtRiskMargin)", o.atRisk, o.ttl-o.drift())
	}
	// An extension must be able to end before validity falls below the
	// at-risk margin: interval + node timeout < TTL - drift - margin.
	limit := o.ttl - o.drift() - o.atRisk - o.nodeTimeout
	switch {
	case o.keepAlive < 0:
		return invalid("keep-alive interval %v must be positive (WithKeepAlive)", o.keepAlive)
	case o.keepAlive > 0 && o.keepAlive >= limit:
		return invalid("keep-alive interval %v must be less than TTL - drift - at-risk margin - node timeout = %v: "+
			"an extension must end before the lock's validity falls below the at-risk margin %v (WithKeepAlive, WithAtRiskMargin, WithNodeTimeout)",
			o.keepAlive, limit, o.atRisk)
	case o.keepAlive == 0:
		o.keepAlive = o.ttl / DefaultKeepAliveDivisor
		switch {
		case o.keepAlive < limit:
		case o.atRiskSet:
			return invalid("at-risk margin %v leaves no room to keep a lock alive: TTL - drift - at-risk margin - node timeout = %v must exceed the keep-alive interval %v (WithAtRiskMargin, WithKeepAlive)",
				o.atRisk, limit, o.keepAlive)
		default: // a default New must not refuse: KeepAlive does
			o.keepAliveErr = invalid("TTL %v leaves no room to keep a lock alive: TTL - drift - at-risk margin - node timeout = %v must exceed the keep-alive interval %v (WithTTL, WithNodeTimeout, WithKeepAlive, WithAtRiskMargin)",
				o.ttl, limit, o.keepAlive)
		}
	}
	o.keepAliveRetry = strategies.JitterDelay(o.ttl/20, o.ttl/10)
	if o.maxHold < 0 {
		return invalid("maximum hold time %v must not be negative (WithMaxHold)", o.maxHold)
	}
	switch {
	case !o.guardSet && n >= 3:
		o.guard = o.ttl
	case !o.guardSet:
		o.guard = 0
	case o.guard < 0:
		return invalid("restart guard max TTL %v must not be negative (WithRestartGuard; 0 turns it off)", o.guard)
	case o.guard > 0 && o.guard < o.ttl:
		return invalid("restart guard max TTL %v is shorter than the TTL %v: a restarted node would count again while locks it forgot still live elsewhere (WithRestartGuard)", o.guard, o.ttl)
	case o.guard > maxGuard:
		return invalid("restart guard max TTL %v is longer than %v (WithRestartGuard)", o.guard, maxGuard)
	}
	return nil
}

// String summarises the effective configuration.
func (o *options) String() string {
	return fmt.Sprintf("ttl=%v quorum=%d strategy=%s tries=%d drift=%v node-timeout=%v keep-alive=%v at-risk=%v fencing=%t wake=%t restart-guard=%v",
		o.ttl, o.quorum, o.strategy, o.tries, o.drift(), o.nodeTimeout, o.keepAlive, o.atRisk, o.fencing, o.wake, o.guard)
}
