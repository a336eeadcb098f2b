package httplock_test

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/middleware/httplock"
)

// runs numbers the runs of the tests here (-count), for freshPrefix.
var runs atomic.Int64

// freshPrefix keeps the keys of each run apart: a write that waited
// leaves a mark that keeps new reads out of its key for a TTL.
func freshPrefix(t *testing.T) httplock.Option {
	return httplock.WithKeyPrefix(t.Name() + ":" + strconv.FormatInt(runs.Add(1), 10) + ":")
}

// holding serves requests on "/orders/{id}" under mw: a request with an
// X-Hold header reports its method and lock kind on entered, then stays
// inside until that gate closes (or its context ends).
type holding struct {
	mux     *http.ServeMux
	entered chan string
	gates   map[string]chan struct{}
}

func newHolding(t *testing.T, mw func(http.Handler) http.Handler, gates ...string) *holding {
	t.Helper()
	h := &holding{mux: http.NewServeMux(), entered: make(chan string, len(gates)), gates: map[string]chan struct{}{}}
	for _, g := range gates {
		h.gates[g] = make(chan struct{})
	}
	h.mux.Handle("/orders/{id}", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lock, ok := httplock.FromContext(r.Context())
		require.True(t, ok)
		gate, hold := h.gates[r.Header.Get("X-Hold")]
		if !hold {
			return
		}
		h.entered <- r.Method + " shared=" + strconv.FormatBool(lock.Shared())
		select {
		case <-gate:
		case <-r.Context().Done():
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	})))
	return h
}

// start sends a request for target that holds its lock until gate
// closes, and waits until its handler is inside; it returns the request's
// status, to come.
func (h *holding) start(t *testing.T, method, target, gate string) <-chan int {
	t.Helper()
	code := make(chan int, 1)
	go func() { code <- serve(t, h.mux, method, target, "X-Hold", gate).Code }()
	select {
	case got := <-h.entered:
		assert.Equal(t, method+" shared="+strconv.FormatBool(method != http.MethodPost), got)
	case c := <-code:
		require.Failf(t, "refused", "%s was answered %d while the others held the key", method, c)
	}
	return code
}

// release lets the holder behind gate go and checks its answer.
func (h *holding) release(t *testing.T, gate string, code <-chan int) {
	t.Helper()
	close(h.gates[gate])
	c, err := within(code, requestTimeout)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, c)
}

// WithSharedReads: reads (GET, HEAD, OPTIONS) of one key run at once; a
// write (POST) is busy while any runs, and new reads wait behind it; a
// write holds its key alone.
func TestSharedReads(t *testing.T) {
	locker := newLocker(t, redistest.SharedServers(t, 3))
	mw, err := httplock.New(locker, httplock.PathValue("id"), freshPrefix(t), httplock.WithSharedReads(true))
	require.NoError(t, err)
	h := newHolding(t, mw, "get", "head", "options", "post")

	get := h.start(t, http.MethodGet, "/orders/1", "get")
	head := h.start(t, http.MethodHead, "/orders/1", "head")
	options := h.start(t, http.MethodOptions, "/orders/1", "options")
	w := serve(t, h.mux, http.MethodPost, "/orders/1")
	assert.Equal(t, http.StatusLocked, w.Code, "a write waits for the reads")
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Equal(t, http.StatusOK, serve(t, h.mux, http.MethodGet, "/orders/1").Code,
		"a write that did not wait (no WithWait) keeps no new read out")
	h.release(t, "get", get)
	h.release(t, "head", head)
	h.release(t, "options", options)

	post := h.start(t, http.MethodPost, "/orders/2", "post")
	assert.Equal(t, http.StatusLocked, serve(t, h.mux, http.MethodGet, "/orders/2").Code, "a read waits for the write")
	assert.Equal(t, http.StatusLocked, serve(t, h.mux, http.MethodPut, "/orders/2").Code, "and so does another write")
	h.release(t, "post", post)
	assert.Equal(t, http.StatusOK, serve(t, h.mux, http.MethodGet, "/orders/2").Code)
}

// With WithWait, a read waits for a write to end, and then runs.
func TestSharedReadsWait(t *testing.T) {
	locker := newLocker(t, redistest.SharedServers(t, 3))
	prefix := freshPrefix(t)
	mw, err := httplock.New(locker, httplock.PathValue("id"), prefix, httplock.WithSharedReads(true))
	require.NoError(t, err)
	waiting, err := httplock.New(locker, httplock.PathValue("id"), prefix, httplock.WithSharedReads(true), httplock.WithWait(requestTimeout))
	require.NoError(t, err)
	h, hw := newHolding(t, mw, "post"), newHolding(t, waiting, "get")

	post := h.start(t, http.MethodPost, "/orders/1", "post")
	code := make(chan int, 1)
	go func() { code <- serve(t, hw.mux, http.MethodGet, "/orders/1", "X-Hold", "get").Code }()
	select {
	case c := <-code:
		require.Failf(t, "did not wait", "the read was answered %d while the write held the key", c)
	case got := <-hw.entered:
		require.Failf(t, "did not wait", "%s ran while the write held the key", got)
	default:
	}
	h.release(t, "post", post)
	got, err := within(hw.entered, requestTimeout)
	require.NoError(t, err)
	assert.Equal(t, "GET shared=true", got)
	hw.release(t, "get", code)
}

// Off (the default), a read holds the key alone, as a write does.
func TestSharedReadsOff(t *testing.T) {
	locker := newLocker(t, redistest.SharedServers(t, 3))
	mw, err := httplock.New(locker, httplock.PathValue("id"), freshPrefix(t), httplock.WithSharedReads(true), httplock.WithSharedReads(false))
	require.NoError(t, err)
	h := newHolding(t, mw, "get")
	code := make(chan int, 1)
	go func() { code <- serve(t, h.mux, http.MethodGet, "/orders/1", "X-Hold", "get").Code }()
	got, err := within(h.entered, requestTimeout)
	require.NoError(t, err)
	assert.Equal(t, "GET shared=false", got)
	assert.Equal(t, http.StatusLocked, serve(t, h.mux, http.MethodGet, "/orders/1").Code)
	h.release(t, "get", code)
}

// WithKeySeparator: a request holds every key of its list at once; one
// whose list overlaps a held one is busy, a disjoint one runs beside it;
// a list with a key given twice is a bad request.
func TestKeySeparator(t *testing.T) {
	locker := newLocker(t, redistest.SharedServers(t, 3))
	mw, err := httplock.New(locker, httplock.Header("X-Keys"), httplock.WithKeySeparator(","), freshPrefix(t))
	require.NoError(t, err)
	entered, gate := make(chan []string, 1), make(chan struct{})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lock, _ := httplock.FromContext(r.Context())
		if r.Header.Get("X-Hold") != "" {
			entered <- lock.Keys()
			<-gate
		}
	}))
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	defer open() // a failed check lets the holder go
	code := make(chan int, 1)
	go func() { code <- serve(t, h, http.MethodGet, "/", "X-Keys", "b,a", "X-Hold", "1").Code }()
	assert.Len(t, <-entered, 2, "the request holds both keys")
	assert.Equal(t, http.StatusLocked, serve(t, h, http.MethodPost, "/", "X-Keys", "c,b").Code, "an overlapping list is busy")
	assert.Equal(t, http.StatusLocked, serve(t, h, http.MethodGet, "/", "X-Keys", "a").Code, "one key of the list is busy")
	assert.Equal(t, http.StatusOK, serve(t, h, http.MethodPost, "/", "X-Keys", "c,d").Code, "a disjoint list runs beside it")
	bad := serve(t, h, http.MethodPost, "/", "X-Keys", "c,c")
	assert.Equal(t, http.StatusBadRequest, bad.Code, "a key given twice")
	assert.Contains(t, bad.Body.String(), "invalid lock keys")
	assert.Equal(t, http.StatusBadRequest, serve(t, h, http.MethodPost, "/", "X-Keys", "c,").Code, "an empty key, behind the prefix")
	open()
	assert.Equal(t, http.StatusOK, <-code)
	assert.Equal(t, http.StatusOK, serve(t, h, http.MethodPost, "/", "X-Keys", "c,b").Code, "free again")
}
