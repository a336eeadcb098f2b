package httplock_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/httplock"
)

// The subtests of TestMisuseHttplock are rows of the table "Bad input and
// the errors it gets" of docs/errors.md (TestReadmeBadInputTable, in core,
// checks that each one named there exists).

func TestMisuseHttplock(t *testing.T) {
	locker, err := core.New(memory.AsNodes(memory.NewNodes(3)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = locker.Close() })
	key := httplock.PathValue("id")
	refused := func(t *testing.T, msg string, locker *core.Locker, key httplock.KeyFunc, opts ...httplock.Option) {
		t.Helper()
		mw, err := httplock.New(locker, key, opts...)
		assert.Nil(t, mw)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		require.ErrorContains(t, err, msg)
	}
	// handled serves one POST of target through the middleware around next
	// on the routes "/orders/{id}" (key: id) and "/orders/" (no key), and
	// returns the answer and the error the error handler was given.
	handled := func(t *testing.T, next http.Handler, target string) (int, string, error) {
		t.Helper()
		var got error
		mw, err := httplock.New(locker, key, httplock.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			got = err
			httplock.DefaultErrorHandler(w, r, err)
		}))
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("POST /orders/{id}", mw(next))
		mux.Handle("POST /orders/", mw(next))
		w := serve(t, mux, http.MethodPost, target)
		return w.Code, w.Body.String(), got
	}

	t.Run("nil_locker", func(t *testing.T) {
		refused(t, "httplock: quorumlock: invalid argument: locker is nil", nil, key)
	})
	t.Run("nil_key_func", func(t *testing.T) {
		refused(t, "httplock: quorumlock: invalid argument: key func is nil", locker, nil)
	})
	t.Run("nil_option", func(t *testing.T) {
		// Nil means unset: a nil Option is skipped, a nil handler keeps
		// DefaultErrorHandler.
		mw, err := httplock.New(locker, key, httplock.WithWait(0), nil, httplock.WithErrorHandler(nil))
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle("POST /orders/", mw(http.NotFoundHandler()))
		w := serve(t, mux, http.MethodPost, "/orders/")
		assert.Equal(t, http.StatusBadRequest, w.Code)
		assert.Equal(t, "missing lock key\n", w.Body.String())
	})
	t.Run("bad_option_value", func(t *testing.T) {
		for _, c := range []struct {
			opt httplock.Option
			msg string
		}{
			{httplock.WithWait(-time.Second), "httplock: quorumlock: invalid argument: WithWait(-1s): the wait must not be negative (0: do not wait)"},
			{httplock.WithBusyStatus(200), "httplock: quorumlock: invalid argument: WithBusyStatus(200): not a 4xx or 5xx status code"},
			{httplock.WithRetryAfter(0), "httplock: quorumlock: invalid argument: WithRetryAfter(0s): the delay must be positive"},
			{httplock.WithReleaseTimeout(-time.Second), "httplock: quorumlock: invalid argument: WithReleaseTimeout(-1s): the timeout must be positive"},
		} {
			refused(t, c.msg, locker, key, c.opt)
		}
	})
	t.Run("nil_handler", func(t *testing.T) {
		code, body, err := handled(t, nil, "/orders/42")
		assert.Equal(t, http.StatusInternalServerError, code)
		assert.Equal(t, "internal server error\n", body)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		require.ErrorContains(t, err, "httplock: 500 Internal Server Error: httplock: quorumlock: invalid argument: the wrapped handler is nil")
	})
	t.Run("request_without_key", func(t *testing.T) {
		ran := false
		code, body, err := handled(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }), "/orders/")
		assert.False(t, ran, "the handler does not run")
		assert.Equal(t, http.StatusBadRequest, code)
		assert.Equal(t, "missing lock key\n", body)
		require.ErrorIs(t, err, httplock.ErrNoKey)
		require.ErrorContains(t, err, "httplock: 400 Bad Request: httplock: request has no lock key")
		var e *httplock.Error
		require.True(t, errors.As(err, &e))
		assert.Equal(t, http.StatusBadRequest, e.Status)
	})
}
