package httplock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/core"
)

// ErrNoKey is the cause of the refusal of a request that has no key (its
// KeyFunc returned false or an empty key), unless WithPassUnkeyed(true)
// is given.
var ErrNoKey = errors.New("httplock: request has no lock key")

// Error is what the middleware hands its error handler (WithErrorHandler)
// when it refuses a
// request: the status code it chose, the Retry-After delay it advertised
// (0 when it set none), the lock key (empty when the request had none) and
// the cause, which errors.Is matches against ErrNoKey, core.ErrNotAcquired,
// core.ErrUnavailable, core.ErrClosed, context errors and the rest of
// core's categories.
type Error struct {
	Status     int
	RetryAfter time.Duration
	Key        string
	Err        error
}

// Error describes the refusal.
func (e *Error) Error() string {
	s := "httplock: " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
	if e.Key != "" {
		s += " for key " + strconv.Quote(e.Key)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// DefaultErrorHandler answers with the status of the *Error it is given
// (500 for any other error) and a short plain-text body that names the
// kind of refusal without internal details such as node addresses.
func DefaultErrorHandler(w http.ResponseWriter, _ *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		http.Error(w, "internal server error", http.StatusInternalServerError)
		return
	}
	var msg string
	switch {
	case errors.Is(e.Err, ErrNoKey):
		msg = "missing lock key"
	case e.Status == http.StatusBadRequest:
		msg = "invalid lock keys"
	case e.Status == http.StatusServiceUnavailable:
		msg = "lock service unavailable, retry later"
	case e.Status >= 500 && e.RetryAfter == 0:
		msg = "internal server error"
	default:
		msg = "resource is locked, retry later"
	}
	http.Error(w, msg, e.Status)
}

type lockKey struct{}

// FromContext returns the lock the middleware holds for the request whose
// context is ctx (or a context derived from it), and false when there is
// none (an unkeyed request passed through by WithPassUnkeyed).
func FromContext(ctx context.Context) (*core.Lock, bool) {
	if ctx == nil {
		return nil, false
	}
	lock, ok := ctx.Value(lockKey{}).(*core.Lock)
	return lock, ok && lock != nil
}

// New returns middleware that runs each request's handler while holding
// the lock named by key(r) on locker (a shared lock for safe methods with
// WithSharedReads), or refuses the request:
//
//   - no key: 400 Bad Request (or the handler runs unlocked with
//     WithPassUnkeyed(true));
//   - lock held elsewhere (after waiting, with WithWait): 423 Locked
//     (WithBusyStatus), with a Retry-After header (WithRetryAfter);
//   - too few nodes answering, rounds too slow to leave validity, a closed
//     Locker, or the request's context ending before the lock was won: 503
//     Service Unavailable, with a Retry-After header;
//   - anything else: 500 Internal Server Error.
//
// Refusals are written by the error handler (WithErrorHandler). While the
// handler runs, the lock is held (core.Lock.Hold): kept alive, and the request's context is
// cancelled, with the lock's error as its cause, if the lock is lost, or
// with a cause matching core.ErrClosed when the Locker is closing, whose
// Close then waits for the handler to return before releasing the lock. The lock is released when the handler
// returns or panics (the panic then goes on), under a context detached from
// the request's and bounded by WithReleaseTimeout.
//
// New returns an error matching core.ErrInvalidArgument, and no
// middleware, when locker or key is nil or an option is invalid; it skips
// a nil Option. The middleware wraps a nil handler into one that answers
// 500.
func New(locker *core.Locker, key KeyFunc, opts ...Option) (func(http.Handler) http.Handler, error) {
	if locker == nil {
		return nil, fmt.Errorf("httplock: %w: locker is nil", core.ErrInvalidArgument)
	}
	if key == nil {
		return nil, fmt.Errorf("httplock: %w: key func is nil", core.ErrInvalidArgument)
	}
	c := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	m := &middleware{locker: locker, key: key, c: c}
	return m.wrap, nil
}

type middleware struct {
	locker *core.Locker
	key    KeyFunc
	c      config
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	if next == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.c.errorHandler(w, r, &Error{
				Status: http.StatusInternalServerError,
				Err:    fmt.Errorf("httplock: %w: the wrapped handler is nil", core.ErrInvalidArgument),
			})
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, ok := m.key(r)
	if !ok || key == "" {
		if m.c.passUnkeyed {
			next.ServeHTTP(w, r)
			return
		}
		m.c.errorHandler(w, r, &Error{Status: http.StatusBadRequest, Err: ErrNoKey})
		return
	}
	keys := []string{key}
	if m.c.keySep != "" {
		keys = strings.Split(key, m.c.keySep)
	}
	for i := range keys {
		if keys[i] == "" { // before the prefix, which would hide it
			m.refuse(w, r, key, fmt.Errorf("httplock: %w: an empty key in the list %q", core.ErrInvalidArgument, key))
			return
		}
		keys[i] = m.c.keyPrefix + keys[i]
	}
	key = strings.Join(keys, ",")

	lock, err := m.acquire(r.Context(), keys, m.c.sharedReads && safe(r.Method))
	if err != nil {
		m.refuse(w, r, key, err)
		return
	}
	// Held (kept alive, and never released by the Locker's Close while
	// the handler runs) until the handler returns.
	ctx, done, err := lock.Hold(r.Context())
	if err != nil {
		m.release(r, lock)
		m.refuse(w, r, key, err)
		return
	}
	// Deferred calls run when the handler panics too; the panic then goes on.
	defer func() {
		m.release(r, lock)
		done()
	}()
	next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, lockKey{}, lock)))
}

// acquire takes the lock on keys, shared (one key) or exclusive, once or
// waiting up to WithWait.
func (m *middleware) acquire(ctx context.Context, keys []string, shared bool) (*core.Lock, error) {
	try, wait := m.locker.TryAcquireAll, m.locker.AcquireAll
	if len(keys) == 1 {
		try, wait = oneKey(m.locker.TryAcquire), oneKey(m.locker.Acquire)
		if shared {
			try, wait = oneKey(m.locker.TryAcquireShared), oneKey(m.locker.AcquireShared)
		}
	}
	if m.c.wait == 0 {
		return try(ctx, keys...)
	}
	ctx, cancel := context.WithTimeout(ctx, m.c.wait)
	defer cancel()
	return wait(ctx, keys...)
}

// oneKey adapts an acquisition of one key to a list of one.
func oneKey(f func(context.Context, string) (*core.Lock, error)) func(context.Context, ...string) (*core.Lock, error) {
	return func(ctx context.Context, keys ...string) (*core.Lock, error) { return f(ctx, keys[0]) }
}

// safe reports whether method is safe (RFC 9110, section 9.2.1): a read
// that a shared lock covers, with WithSharedReads.
func safe(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

func (m *middleware) release(r *http.Request, lock *core.Lock) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.c.releaseTimeout)
	defer cancel()
	// A failed release leaves keys that expire with the TTL; the answer
	// has been written already, so there is no one to tell.
	_ = lock.Release(ctx)
}

// refuse answers a request whose lock could not be taken or kept.
func (m *middleware) refuse(w http.ResponseWriter, r *http.Request, key string, err error) {
	e := &Error{Status: http.StatusInternalServerError, Key: key, Err: err}
	qe := (*core.QuorumError)(nil)
	isQE := errors.As(err, &qe)
	switch {
	case !isQE && errors.Is(err, core.ErrInvalidArgument): // the request's keys (WithKeySeparator)
		e.Status = http.StatusBadRequest
	case isQE && qe.Reason == core.ErrNodeRestarted: // servers too young to vote yet
		e.Status, e.RetryAfter = http.StatusServiceUnavailable, m.c.retryAfter
	case errors.Is(err, core.ErrUnavailable), errors.Is(err, core.ErrValidityExpired),
		errors.Is(err, core.ErrClosed), r.Context().Err() != nil:
		e.Status, e.RetryAfter = http.StatusServiceUnavailable, m.c.retryAfter
	case errors.Is(err, core.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded):
		e.Status, e.RetryAfter = m.c.busyStatus, m.c.retryAfter
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfterSeconds(e.RetryAfter))
	}
	m.c.errorHandler(w, r, e)
}

// retryAfterSeconds is d in whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}
