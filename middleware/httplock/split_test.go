package httplock_test

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// TestBurstOnFreeKeyServesOne: twenty requests at once for a key no one
// holds, with the default options (no wait), burst after burst over three
// servers: each burst runs the handler exactly once and answers the other
// requests 423. Before split votes were settled within TryAcquire, two
// bursts in five under -race answered every request 423.
func TestBurstOnFreeKeyServesOne(t *testing.T) {
	const requests, bursts = 20, 200
	// A node timeout that a loaded machine does not reach: this test is
	// about contention, not outages (503).
	locker := newLocker(t, redistest.SharedServers(t, 3), core.WithNodeTimeout(500*time.Millisecond))
	entered := make(chan struct{}, requests)
	var release atomic.Pointer[chan struct{}]
	mux := route(t, locker, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-*release.Load() // hold the lock until every other request is answered
		w.WriteHeader(http.StatusOK)
	})

	idle := 0
	for b := range bursts {
		rel := make(chan struct{})
		release.Store(&rel)
		codes := make(chan int, requests)
		for range requests {
			go func() { codes <- serve(t, mux, http.MethodPost, "/orders/"+strconv.Itoa(b)).Code }()
		}
		got := map[int]int{}
		in, answered, released := 0, 0, false
		for answered < requests {
			if !released && in+answered == requests {
				close(rel)
				released = true
			}
			select {
			case code := <-codes:
				got[code]++
				answered++
			case <-entered:
				in++
			}
		}
		if !released {
			close(rel)
		}
		require.LessOrEqual(t, in, 1, "burst %d: two handlers held the lock at once", b)
		assert.Equal(t, in, got[http.StatusOK], "burst %d: %v", b, got)
		assert.Equal(t, requests-in, got[http.StatusLocked], "burst %d: %v", b, got)
		if in == 0 {
			idle++
		}
	}
	assert.Zero(t, idle, "bursts of %d requests for a free key that all got 423, of %d", requests, bursts)
}
