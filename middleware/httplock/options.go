package httplock

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/core"
)

// The defaults of New. Each option's documentation names the default it
// changes.
const (
	// DefaultBusyStatus answers a request whose lock is held elsewhere:
	// 423 Locked.
	DefaultBusyStatus = http.StatusLocked
	// DefaultRetryAfter is the delay advertised in the Retry-After header of
	// busy and unavailable answers.
	DefaultRetryAfter = time.Second
	// DefaultReleaseTimeout bounds the release of a lock after the handler
	// returned.
	DefaultReleaseTimeout = 5 * time.Second
)

// Option configures the middleware. Options are applied in order by New,
// which validates each of them; a later option overrides an earlier one of
// the same kind. Its String names the option and its arguments.
type Option interface {
	apply(*config)
	String() string
}

type option struct {
	fn   func(*config)
	name string
}

func (o option) apply(c *config) { o.fn(c) }
func (o option) String() string  { return o.name }

// config is what the options set.
type config struct {
	wait           time.Duration // 0: NoWait
	busyStatus     int
	retryAfter     time.Duration
	releaseTimeout time.Duration
	passUnkeyed    bool
	keyPrefix      string
	errorHandler   func(w http.ResponseWriter, r *http.Request, err error)
	err            error // the first invalid option
}

func defaultConfig() config {
	return config{
		busyStatus:     DefaultBusyStatus,
		retryAfter:     DefaultRetryAfter,
		releaseTimeout: DefaultReleaseTimeout,
		errorHandler:   DefaultErrorHandler,
	}
}

func (c *config) invalid(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("httplock: %w: "+format, append([]any{core.ErrInvalidArgument}, args...)...)
	}
}

// NoWait makes the middleware try for the lock once (Locker.TryAcquire)
// and answer busy at once when it is held elsewhere.
// Default: NoWait.
func NoWait() Option {
	return option{func(c *config) { c.wait = 0 }, "NoWait()"}
}

// Wait makes the middleware wait for a lock held elsewhere (Locker.Acquire)
// for at most max, and no longer than the request's context lasts, before
// it answers busy. The Locker's own limits also apply: Acquire gives up
// after WithTries rounds even if max has not passed. max must be positive.
// Default: NoWait.
func Wait(max time.Duration) Option {
	return option{func(c *config) {
		if max <= 0 {
			c.invalid("Wait(%v): the wait must be positive (use NoWait not to wait)", max)
			return
		}
		c.wait = max
	}, "Wait(" + max.String() + ")"}
}

// BusyStatus sets the status code of the answer to a request whose lock is
// held elsewhere, such as 409 Conflict or 429 Too Many Requests. It must be
// a 4xx or 5xx code.
// Default: DefaultBusyStatus (423 Locked).
func BusyStatus(code int) Option {
	return option{func(c *config) {
		if code < 400 || code > 599 {
			c.invalid("BusyStatus(%d): not a 4xx or 5xx status code", code)
			return
		}
		c.busyStatus = code
	}, "BusyStatus(" + strconv.Itoa(code) + ")"}
}

// RetryAfter sets the delay advertised by the Retry-After header of busy
// (BusyStatus) and unavailable (503) answers, in whole seconds rounded up:
// at least 1. It must be positive.
// Default: DefaultRetryAfter (1 s).
func RetryAfter(d time.Duration) Option {
	return option{func(c *config) {
		if d <= 0 {
			c.invalid("RetryAfter(%v): the delay must be positive", d)
			return
		}
		c.retryAfter = d
	}, "RetryAfter(" + d.String() + ")"}
}

// ReleaseTimeout bounds the release of the lock once the handler has
// returned or panicked. The release runs under a context detached from the
// request's (which may have been cancelled), so that it always reaches the
// nodes. It must be positive.
// Default: DefaultReleaseTimeout (5 s); each node call is also bounded by
// the Locker's node timeout.
func ReleaseTimeout(d time.Duration) Option {
	return option{func(c *config) {
		if d <= 0 {
			c.invalid("ReleaseTimeout(%v): the timeout must be positive", d)
			return
		}
		c.releaseTimeout = d
	}, "ReleaseTimeout(" + d.String() + ")"}
}

// PassUnkeyed makes the middleware run the handler without a lock for a
// request that has no key (the KeyFunc returned false or an empty key);
// FromContext then reports no lock.
// Default: such a request is refused with 400 Bad Request (an *Error
// matching ErrNoKey), and the handler does not run.
func PassUnkeyed() Option {
	return option{func(c *config) { c.passUnkeyed = true }, "PassUnkeyed()"}
}

// KeyPrefix puts prefix before every key the KeyFunc returns, so that the
// same path value or header on two routes names two locks:
// KeyPrefix("orders:") with PathValue("id") locks "orders:42".
// Default: no prefix (the Locker may still add its own, core.WithKeyPrefix).
func KeyPrefix(prefix string) Option {
	return option{func(c *config) { c.keyPrefix = prefix }, "KeyPrefix(" + strconv.Quote(prefix) + ")"}
}

// ErrorHandler sets the function that answers a request the middleware
// refuses: no key, lock busy, lock service unavailable, or another failure.
// It receives an *Error (errors.As) that carries the status code the
// middleware chose and the cause; busy and unavailable answers already have
// their Retry-After header set on w when it is called. f must not be nil.
// Default: DefaultErrorHandler.
func ErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return option{func(c *config) {
		if f == nil {
			c.invalid("ErrorHandler(nil)")
			return
		}
		c.errorHandler = f
	}, "ErrorHandler(...)"}
}
