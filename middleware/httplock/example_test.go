package httplock_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/httplock"
)

// One order is updated by one request at a time: a second request for the
// same order, while the first holds its lock, is answered 423 Locked.
func Example() {
	locker, err := core.New(memory.AsNodes(memory.NewNodes(3)))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	lockOrder, err := httplock.New(locker, httplock.PathValue("id"),
		httplock.WithKeyPrefix("orders:"), httplock.WithRetryAfter(2*time.Second))
	if err != nil {
		panic(err)
	}

	inside, proceed := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}", lockOrder(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lock, _ := httplock.FromContext(r.Context())
		fmt.Println("updating under", lock.Key())
		if r.Header.Get("X-Slow") != "" {
			close(inside)
			<-proceed
		}
		// r.Context() is cancelled if the lock is lost: stop writing then.
		fmt.Fprintln(w, "updated order", r.PathValue("id"))
	})))

	post := func(slow bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/orders/42", nil)
		if slow {
			r.Header.Set("X-Slow", "1")
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}

	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- post(true) }()
	<-inside

	busy := post(false)
	fmt.Println("second request:", busy.Code, "Retry-After", busy.Header().Get("Retry-After"))

	close(proceed)
	w := <-first
	fmt.Print("first request: ", w.Code, " ", w.Body.String())
	// Output:
	// updating under orders:42
	// second request: 423 Retry-After 2
	// first request: 200 updated order 42
}

// With WithSharedReads, reads of one order run at once, while an update
// waits for them (here, with WithWait(0), it is answered busy).
func ExampleWithSharedReads() {
	locker, err := core.New(memory.AsNodes(memory.NewNodes(3)))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	lockOrder, err := httplock.New(locker, httplock.PathValue("id"),
		httplock.WithKeyPrefix("orders:"), httplock.WithSharedReads(true))
	if err != nil {
		panic(err)
	}

	inside, proceed := make(chan struct{}, 2), make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("/orders/{id}", lockOrder(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Slow") != "" {
			inside <- struct{}{}
			<-proceed
		}
		lock, _ := httplock.FromContext(r.Context())
		fmt.Fprintln(w, r.Method, "shared:", lock.Shared())
	})))

	send := func(method string, slow bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/orders/42", nil)
		if slow {
			r.Header.Set("X-Slow", "1")
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}

	reads := make(chan *httptest.ResponseRecorder, 2)
	for range 2 {
		go func() { reads <- send(http.MethodGet, true) }()
	}
	<-inside
	<-inside
	fmt.Println("two reads inside at once; an update:", send(http.MethodPut, false).Code)

	close(proceed)
	for range 2 {
		w := <-reads
		fmt.Print("read: ", w.Code, " ", w.Body.String())
	}
	// Output:
	// two reads inside at once; an update: 423
	// read: 200 GET shared: true
	// read: 200 GET shared: true
}
