// Package httplock is net/http middleware that runs a handler while
// holding a quorumlock lock, one lock per key taken from the request: at
// most one request per key is served at a time, across every process that
// shares the Locker's Redis nodes.
//
//	mw, err := httplock.New(locker, httplock.PathValue("id"),
//		httplock.WithKeyPrefix("orders:"), httplock.WithWait(2*time.Second))
//	if err != nil { ... }
//	mux.Handle("POST /orders/{id}", mw(http.HandlerFunc(updateOrder)))
//
// New returns a plain func(http.Handler) http.Handler, so that it composes
// with any router and middleware chain; one middleware may wrap many
// handlers.
//
// # Keys
//
// A KeyFunc names the lock of a request: PathValue for a wildcard of a Go
// 1.22 http.ServeMux pattern, Header for a header such as Idempotency-Key,
// or any function of the request. WithKeyPrefix keeps the keys of
// different routes apart. A request without a key is refused with 400 Bad
// Request by default: a route that needs a lock should not run without one
// by accident; WithPassUnkeyed(true) runs the handler without a lock
// instead.
//
// # Reads and writes
//
// WithSharedReads(true) makes requests with a safe method (GET, HEAD,
// OPTIONS, TRACE) hold a shared (read) lock on their key
// (core.Locker.AcquireShared), so that reads of one key run at once, and
// requests with any other method hold the exclusive lock, which runs
// alone. A write that finds reads running is busy (or waits, with
// WithWait), and from then new reads of its key wait behind it, so that
// writes are not starved (docs/locks.md). The handler's lock reports
// which it is (core.Lock.Shared).
//
// # Contention
//
// By default (WithWait(0)) the middleware makes one attempt
// (Locker.TryAcquire) and answers a request whose lock is held elsewhere
// at once with 423 Locked (WithBusyStatus changes it, to 409 Conflict for
// instance). Of many requests at once for a free key, one runs:
// TryAcquire settles a split vote. WithWait(max) waits for the lock
// (Locker.Acquire) for at most max, and no longer than the request's
// context, before answering busy.
// Busy answers carry a Retry-After header of WithRetryAfter (1 s by
// default, in whole seconds, at least 1).
//
// # Errors
//
// An outage of the lock service (core.ErrUnavailable: too few nodes
// answered; core.ErrValidityExpired: nodes too slow; core.ErrClosed; a
// QuorumError whose Reason is core.ErrNodeRestarted: servers too young to
// vote under the restart guard), and a
// request whose own context ended before the lock was won, are answered
// with 503 Service Unavailable and a Retry-After header; other failures
// with 500. Every refusal is written by the error handler
// (WithErrorHandler; DefaultErrorHandler unless set), which receives an *Error holding the
// status code, the key and the cause, with Retry-After already set on the
// response; it may write any answer it likes.
//
// # While the handler runs
//
// The lock is held (core.Lock.Hold): kept alive every WithKeepAlive
// interval of the Locker, and the request's context is replaced by the
// lock's: if the lock is lost, the handler's context is cancelled and
// context.Cause says why (an error matching core.ErrLockLost); if the
// Locker is closing, the cause matches core.ErrClosed, and the Locker's
// Close (or Shutdown, until its context ends) waits for the handler to
// return: the lock is never released under a running handler. A handler that writes to storage must stop then, and
// can pass the lock's fencing token along (FromContext gives the lock).
// When the handler returns, or panics, the lock is released under a
// context detached from the request's, which may have been cancelled, and
// bounded by WithReleaseTimeout; a panic then goes on up the stack.
package httplock
