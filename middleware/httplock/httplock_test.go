package httplock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/httplock"
)

// requestTimeout bounds every request a test sends.
const requestTimeout = 15 * time.Second

// serve sends one request to h and returns the answer. The request's
// context ends after requestTimeout.
func serve(t *testing.T, h http.Handler, method, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// route serves handler under mw on "POST /orders/{id}".
func route(t *testing.T, locker *core.Locker, handler http.HandlerFunc, opts ...httplock.Option) *http.ServeMux {
	t.Helper()
	opts = append([]httplock.Option{httplock.WithKeyPrefix(t.Name() + ":")}, opts...)
	mw, err := httplock.New(locker, httplock.PathValue("id"), opts...)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}", mw(handler))
	return mux
}

func TestNewValidates(t *testing.T) {
	locker, err := core.New(memory.AsNodes(memory.NewNodes(3)))
	require.NoError(t, err)
	defer locker.Close()
	key := httplock.PathValue("id")

	_, err = httplock.New(nil, key)
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = httplock.New(locker, nil)
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	for _, o := range []httplock.Option{
		httplock.WithWait(-time.Second),
		httplock.WithBusyStatus(200),
		httplock.WithBusyStatus(600),
		httplock.WithRetryAfter(0),
		httplock.WithReleaseTimeout(-time.Second),
	} {
		mw, err := httplock.New(locker, key, o)
		assert.ErrorIs(t, err, core.ErrInvalidArgument, "%v", o)
		assert.Nil(t, mw)
	}

	// Nil means unset: a nil Option is skipped, and a nil handler keeps
	// the default one.
	for _, o := range []httplock.Option{nil, httplock.WithWait(0), httplock.WithErrorHandler(nil)} {
		mw, err := httplock.New(locker, key, o)
		require.NoError(t, err, "%v", o)
		w := serve(t, mw(http.NotFoundHandler()), http.MethodPost, "/")
		assert.Equal(t, http.StatusBadRequest, w.Code, "%v", o)
		assert.Equal(t, "missing lock key\n", w.Body.String(), "%v: DefaultErrorHandler", o)
	}

	mw, err := httplock.New(locker, key, httplock.WithWait(time.Second), httplock.WithWait(0),
		httplock.WithBusyStatus(http.StatusConflict), httplock.WithRetryAfter(time.Minute),
		httplock.WithReleaseTimeout(time.Second), httplock.WithPassUnkeyed(true), httplock.WithKeyPrefix("p:"),
		httplock.WithErrorHandler(httplock.DefaultErrorHandler))
	require.NoError(t, err)
	require.NotNil(t, mw)
	for want, o := range map[string]httplock.Option{
		"WithWait(1.5s)":         httplock.WithWait(1500 * time.Millisecond),
		"WithWait(0s)":           httplock.WithWait(0),
		"WithBusyStatus(409)":    httplock.WithBusyStatus(409),
		"WithRetryAfter(2s)":     httplock.WithRetryAfter(2 * time.Second),
		"WithReleaseTimeout(1s)": httplock.WithReleaseTimeout(time.Second),
		"WithPassUnkeyed(true)":  httplock.WithPassUnkeyed(true),
		`WithKeyPrefix("p:")`:    httplock.WithKeyPrefix("p:"),
		"WithErrorHandler(...)":  httplock.WithErrorHandler(httplock.DefaultErrorHandler),
		"WithErrorHandler(nil)":  httplock.WithErrorHandler(nil),
	} {
		assert.Equal(t, want, o.String())
	}

	// A nil handler is answered with 500, not a panic.
	w := serve(t, mw(nil), http.MethodPost, "/")
	assert.Equal(t, http.StatusInternalServerError, w.Code)
}

// Twenty requests for one key with WithWait are served one at a time.
func TestWaitServesOneAtATime(t *testing.T) {
	locker := newLocker(t, redistest.SharedServers(t, 3), core.WithTries(1000))
	var (
		inside  atomic.Int32
		overlap atomic.Bool
		mu      sync.Mutex
		log     []string
	)
	record := func(s string) {
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
	}
	mux := route(t, locker, func(w http.ResponseWriter, r *http.Request) {
		if inside.Add(1) != 1 {
			overlap.Store(true)
		}
		id := r.Header.Get("X-Request")
		record("enter " + id)
		lock, ok := httplock.FromContext(r.Context())
		if !ok || lock.Validity() <= 0 {
			overlap.Store(true) // not holding a valid lock counts as an overlap
		}
		record("exit " + id)
		inside.Add(-1)
		w.WriteHeader(http.StatusOK)
	}, httplock.WithWait(requestTimeout))

	const n = 20
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			codes[i] = serve(t, mux, http.MethodPost, "/orders/42", "X-Request", fmt.Sprint(i)).Code
		})
	}
	wg.Wait()

	for i, c := range codes {
		assert.Equal(t, http.StatusOK, c, "request %d", i)
	}
	assert.False(t, overlap.Load(), "two handlers ran at once")
	require.Len(t, log, 2*n)
	for i := 0; i < len(log); i += 2 {
		var enter, exit string
		_, err1 := fmt.Sscanf(log[i], "enter %s", &enter)
		_, err2 := fmt.Sscanf(log[i+1], "exit %s", &exit)
		require.NoError(t, errors.Join(err1, err2), "log %v", log)
		assert.Equal(t, enter, exit, "an entry is followed by its own exit: %v", log)
	}
}

// A blocking handler holds the key; others are told it is busy.
func TestNoWaitBusy(t *testing.T) {
	locker := newLocker(t, redistest.SharedServers(t, 3))
	entered, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	handler := func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if r.Header.Get("X-Block") != "" {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}
	mux := route(t, locker, handler)
	conflict := route(t, locker, handler, httplock.WithBusyStatus(http.StatusConflict), httplock.WithRetryAfter(2500*time.Millisecond))
	waiting := route(t, locker, handler, httplock.WithWait(100*time.Millisecond))

	first := make(chan int, 1)
	go func() { first <- serve(t, mux, http.MethodPost, "/orders/7", "X-Block", "1").Code }()
	_, err := within(entered, requestTimeout)
	require.NoError(t, err)

	w := serve(t, mux, http.MethodPost, "/orders/7")
	assert.Equal(t, http.StatusLocked, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Equal(t, "resource is locked, retry later\n", w.Body.String())

	w = serve(t, conflict, http.MethodPost, "/orders/7")
	assert.Equal(t, http.StatusConflict, w.Code)
	assert.Equal(t, "3", w.Header().Get("Retry-After"), "2.5 s rounds up")

	w = serve(t, waiting, http.MethodPost, "/orders/7")
	assert.Equal(t, http.StatusLocked, w.Code, "a wait that runs out is busy")
	assert.Equal(t, "1", w.Header().Get("Retry-After"))

	assert.Equal(t, int32(1), runs.Load(), "only the holder's handler ran")
	close(release)
	code, err := within(first, requestTimeout)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)

	assert.Equal(t, http.StatusOK, serve(t, mux, http.MethodPost, "/orders/7").Code, "the key is free again")
}

// Requests for different keys run at the same time.
func TestDifferentKeysRunConcurrently(t *testing.T) {
	locker := newLocker(t, redistest.SharedServers(t, 3))
	entered, release := make(chan string, 2), make(chan struct{})
	mux := route(t, locker, func(w http.ResponseWriter, r *http.Request) {
		entered <- r.PathValue("id")
		select {
		case <-release:
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done():
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	})

	codes := make(chan int, 2)
	for _, id := range []string{"a", "b"} {
		go func() { codes <- serve(t, mux, http.MethodPost, "/orders/"+id).Code }()
	}
	got := map[string]bool{}
	for range 2 {
		id, err := within(entered, requestTimeout)
		require.NoError(t, err, "both handlers must be inside at once")
		got[id] = true
	}
	assert.Equal(t, map[string]bool{"a": true, "b": true}, got)
	close(release)
	for range 2 {
		code, err := within(codes, requestTimeout)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
	}
}

func TestMissingKey(t *testing.T) {
	locker := newLocker(t, redistest.SharedServers(t, 3))
	var ran, locked atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		if _, ok := httplock.FromContext(r.Context()); ok {
			locked.Add(1)
		}
	})

	mw, err := httplock.New(locker, httplock.Header("Idempotency-Key"))
	require.NoError(t, err)
	w := serve(t, mw(handler), http.MethodPost, "/pay")
	assert.Equal(t, http.StatusBadRequest, w.Code, "no key: 400 by default")
	assert.Equal(t, "missing lock key\n", w.Body.String())
	assert.Empty(t, w.Header().Get("Retry-After"))
	assert.Equal(t, int32(0), ran.Load())

	w = serve(t, mw(handler), http.MethodPost, "/pay", "Idempotency-Key", t.Name())
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, int32(1), locked.Load(), "with a key the handler holds the lock")

	pass, err := httplock.New(locker, httplock.Header("Idempotency-Key"), httplock.WithPassUnkeyed(true))
	require.NoError(t, err)
	w = serve(t, pass(handler), http.MethodPost, "/pay")
	assert.Equal(t, http.StatusOK, w.Code, "WithPassUnkeyed(true) runs the handler")
	assert.Equal(t, int32(2), ran.Load())
	assert.Equal(t, int32(1), locked.Load(), "without a lock")
}

// A lock deleted behind the holder's back cancels the handler's context
// with the lost-lock cause at the next extension.
func TestLockLostCancelsHandler(t *testing.T) {
	list := redistest.SharedServers(t, 3)
	locker := newLocker(t, list, core.WithTTL(time.Second), core.WithKeepAlive(100*time.Millisecond))
	entered, causes := make(chan string, 1), make(chan error, 1)
	mux := route(t, locker, func(w http.ResponseWriter, r *http.Request) {
		lock, ok := httplock.FromContext(r.Context())
		if !assert.True(t, ok) {
			return
		}
		entered <- lock.Key()
		<-r.Context().Done() // the request's own context ends after requestTimeout
		causes <- context.Cause(r.Context())
		w.WriteHeader(http.StatusConflict)
	})

	codes := make(chan int, 1)
	go func() { codes <- serve(t, mux, http.MethodPost, "/orders/9").Code }()
	key, err := within(entered, requestTimeout)
	require.NoError(t, err)
	assert.Equal(t, t.Name()+":9", key)

	deleteEverywhere(t, list, key)
	cause, err := within(causes, 5*time.Second)
	require.NoError(t, err, "the handler's context was not cancelled")
	assert.ErrorIs(t, cause, core.ErrLockLost)
	assert.NotErrorIs(t, cause, context.DeadlineExceeded)
	code, err := within(codes, requestTimeout)
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, code)
}

// A panicking handler releases the lock, and the panic goes on.
func TestPanicReleasesLock(t *testing.T) {
	locker := newLocker(t, redistest.SharedServers(t, 3))
	boom := errors.New("boom")
	mux := route(t, locker, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Panic") != "" {
			panic(boom)
		}
		w.WriteHeader(http.StatusOK)
	})

	recovered := func() (v any) {
		defer func() { v = recover() }()
		serve(t, mux, http.MethodPost, "/orders/1", "X-Panic", "1")
		return nil
	}()
	assert.Equal(t, boom, recovered, "the panic propagates")

	// Without WithWait: only a released key can be taken at once.
	assert.Equal(t, http.StatusOK, serve(t, mux, http.MethodPost, "/orders/1").Code)
}

// With the servers down, requests are answered 503 with Retry-After.
func TestUnavailable(t *testing.T) {
	list := redistest.TestServers(t, 3)
	locker := newLocker(t, list)
	var ran atomic.Int32
	handler := func(http.ResponseWriter, *http.Request) { ran.Add(1) }
	noWait := route(t, locker, handler)
	wait := route(t, locker, handler, httplock.WithWait(300*time.Millisecond), httplock.WithRetryAfter(10*time.Second))
	require.Equal(t, http.StatusOK, serve(t, noWait, http.MethodPost, "/orders/1").Code)
	for _, srv := range list {
		require.NoError(t, srv.Stop())
	}

	w := serve(t, noWait, http.MethodPost, "/orders/1")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Equal(t, "lock service unavailable, retry later\n", w.Body.String())

	w = serve(t, wait, http.MethodPost, "/orders/1")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "an outage is not contention, even after waiting")
	assert.Equal(t, "10", w.Header().Get("Retry-After"))
	assert.Equal(t, int32(1), ran.Load())
}

// A custom error handler (WithErrorHandler) gets an *Error with the status, key and cause.
func TestErrorHandler(t *testing.T) {
	locker, err := core.New(memory.AsNodes(memory.NewNodes(3)))
	require.NoError(t, err)
	defer locker.Close()
	held, err := locker.TryAcquire(t.Context(), "orders:5")
	require.NoError(t, err)
	defer held.Release(t.Context())

	var got *httplock.Error
	mw, err := httplock.New(locker, httplock.PathValue("id"), httplock.WithKeyPrefix("orders:"),
		httplock.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			require.ErrorAs(t, err, &got)
			w.Header().Del("Retry-After")
			w.WriteHeader(http.StatusTooManyRequests)
		}))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}", mw(http.NotFoundHandler()))

	w := serve(t, mux, http.MethodPost, "/orders/5")
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Empty(t, w.Header().Get("Retry-After"), "the handler may drop the header")
	require.NotNil(t, got)
	assert.Equal(t, http.StatusLocked, got.Status)
	assert.Equal(t, time.Second, got.RetryAfter)
	assert.Equal(t, "orders:5", got.Key)
	assert.ErrorIs(t, got, core.ErrNotAcquired)
	assert.Contains(t, got.Error(), `423 Locked for key "orders:5"`)

	// A request whose context has ended before the lock is won: 503.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders/6", nil)
	mux.ServeHTTP(httptest.NewRecorder(), r)
	assert.Equal(t, http.StatusServiceUnavailable, got.Status)
	assert.ErrorIs(t, got, context.Canceled)
}

// The Locker's Close while a handler runs cancels the handler's context
// (cause core.ErrClosed) and waits for it: the lock is not released under
// a handler still at work.
func TestCloseWaitsForHandler(t *testing.T) {
	nodes := memory.NewNodes(3)
	locker, err := core.New(memory.AsNodes(nodes))
	require.NoError(t, err)
	entered, causes, heldAtEnd := make(chan struct{}), make(chan error, 1), make(chan bool, 1)
	mux := route(t, locker, func(w http.ResponseWriter, r *http.Request) {
		lock, ok := httplock.FromContext(r.Context())
		if !assert.True(t, ok) {
			return
		}
		close(entered)
		<-r.Context().Done()
		causes <- context.Cause(r.Context())
		held := true
		for _, n := range nodes {
			v, _, ok := n.Get(lock.Key())
			held = held && ok && v == lock.Value()
		}
		heldAtEnd <- held
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	codes := make(chan int, 1)
	go func() { codes <- serve(t, mux, http.MethodPost, "/orders/1").Code }()
	_, err = within(entered, requestTimeout)
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { closed <- locker.Close() }()

	cause, err := within(causes, requestTimeout)
	require.NoError(t, err, "Close did not cancel the handler's context")
	assert.ErrorIs(t, cause, core.ErrClosed)
	held, err := within(heldAtEnd, requestTimeout)
	require.NoError(t, err)
	assert.True(t, held, "the lock was released while the handler ran")
	code, err := within(codes, requestTimeout)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	cerr, err := within(closed, requestTimeout)
	require.NoError(t, err)
	require.NoError(t, cerr)
	for _, n := range nodes {
		assert.Empty(t, n.Keys(), "released once the handler returned")
	}
}
