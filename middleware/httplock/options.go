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
// the same kind, and a nil Option is skipped. Its String shows the option
// as written, such as WithWait(2s).
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
	wait           time.Duration // 0: do not wait
	busyStatus     int
	retryAfter     time.Duration
	releaseTimeout time.Duration
	passUnkeyed    bool
	sharedReads    bool
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

// WithWait sets how long the middleware waits for a lock held elsewhere
// before it answers busy. With 0 it does not wait: it tries once
// (Locker.TryAcquire) and answers busy at once. With max > 0 it waits
// (Locker.Acquire) for at most max, and no longer than the request's
// context lasts; the Locker's own limits also apply: Acquire gives up
// after WithTries rounds even if max has not passed.
// Default: 0, no wait.
// A negative max makes New return an error matching
// core.ErrInvalidArgument.
func WithWait(max time.Duration) Option {
	return option{func(c *config) {
		if max < 0 {
			c.invalid("WithWait(%v): the wait must not be negative (0: do not wait)", max)
			return
		}
		c.wait = max
	}, "WithWait(" + max.String() + ")"}
}

// WithBusyStatus sets the status code of the answer to a request whose
// lock is held elsewhere, such as 409 Conflict or 429 Too Many Requests.
// Default: DefaultBusyStatus (423 Locked).
// A code outside 400–599 makes New return an error matching
// core.ErrInvalidArgument.
func WithBusyStatus(code int) Option {
	return option{func(c *config) {
		if code < 400 || code > 599 {
			c.invalid("WithBusyStatus(%d): not a 4xx or 5xx status code", code)
			return
		}
		c.busyStatus = code
	}, "WithBusyStatus(" + strconv.Itoa(code) + ")"}
}

// WithRetryAfter sets the delay advertised by the Retry-After header of
// busy (WithBusyStatus) and unavailable (503) answers, in whole seconds
// rounded up: at least 1.
// Default: DefaultRetryAfter (1 s).
// A delay of 0 or less makes New return an error matching
// core.ErrInvalidArgument.
func WithRetryAfter(d time.Duration) Option {
	return option{func(c *config) {
		if d <= 0 {
			c.invalid("WithRetryAfter(%v): the delay must be positive", d)
			return
		}
		c.retryAfter = d
	}, "WithRetryAfter(" + d.String() + ")"}
}

// WithReleaseTimeout bounds the release of the lock once the handler has
// returned or panicked. The release runs under a context detached from the
// request's (which may have been cancelled), so that it always reaches the
// nodes; each node call is also bounded by the Locker's node timeout.
// Default: DefaultReleaseTimeout (5 s).
// A timeout of 0 or less makes New return an error matching
// core.ErrInvalidArgument.
func WithReleaseTimeout(d time.Duration) Option {
	return option{func(c *config) {
		if d <= 0 {
			c.invalid("WithReleaseTimeout(%v): the timeout must be positive", d)
			return
		}
		c.releaseTimeout = d
	}, "WithReleaseTimeout(" + d.String() + ")"}
}

// WithPassUnkeyed, on, makes the middleware run the handler without a lock
// for a request that has no key (the KeyFunc returned false or an empty
// key); FromContext then reports no lock. Off, such a request is refused
// with 400 Bad Request (an *Error matching ErrNoKey), and the handler does
// not run.
// Default: off.
func WithPassUnkeyed(on bool) Option {
	return option{func(c *config) { c.passUnkeyed = on }, "WithPassUnkeyed(" + strconv.FormatBool(on) + ")"}
}

// WithSharedReads, on, makes requests with a safe method (GET, HEAD,
// OPTIONS, TRACE: RFC 9110, section 9.2.1) hold a shared (read) lock on
// their key (Locker.AcquireShared), so that any number of them run at
// once, while requests with any other method hold the exclusive lock
// (Locker.Acquire), which waits for the shared holders and, once it waits,
// keeps new ones out (docs/locks.md). Off, every request holds the
// exclusive lock. Either way, WithWait and the refusals are the same.
// Default: off.
func WithSharedReads(on bool) Option {
	return option{func(c *config) { c.sharedReads = on }, "WithSharedReads(" + strconv.FormatBool(on) + ")"}
}

// WithKeyPrefix puts prefix before every key the KeyFunc returns, so that
// the same path value or header on two routes names two locks:
// WithKeyPrefix("orders:") with PathValue("id") locks "orders:42". Every
// value is valid.
// Default: "", no prefix (the Locker may still add its own,
// core.WithKeyPrefix).
func WithKeyPrefix(prefix string) Option {
	return option{func(c *config) { c.keyPrefix = prefix }, "WithKeyPrefix(" + strconv.Quote(prefix) + ")"}
}

// WithErrorHandler sets the function that answers a request the middleware
// refuses: no key, lock busy, lock service unavailable, or another failure.
// It receives an *Error (errors.As) that carries the status code the
// middleware chose and the cause; busy and unavailable answers already have
// their Retry-After header set on w when it is called. A nil f changes
// nothing: the handler stays the default (or the one an earlier option
// set). Every value is valid.
// Default: DefaultErrorHandler.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	if f == nil {
		return option{func(*config) {}, "WithErrorHandler(nil)"}
	}
	return option{func(c *config) { c.errorHandler = f }, "WithErrorHandler(...)"}
}
