package measure

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// hangGrace is how long operations may overrun the expected end of a
// measurement (or of a warm-up) before the watchdog aborts it.
const hangGrace = 5 * time.Second

// abortGrace is how long operations may take to return once the instances
// were closed.
const abortGrace = 10 * time.Second

// Watchdog ends measurements whose operations hang: an operation given a
// context that never ends can wait forever inside a system (rueidislock
// does, on a free key, when its first try timed out). Operations of the
// uncontended and parallel modes run under context.Background(), because a
// cancellable context would cost every system allocations and lock
// contention of its own; the watchdog is what bounds them.
type Watchdog struct {
	// Stop ends the measurement early (an interrupt); nil: never.
	Stop context.Context
	// Abort closes the instances under test, which makes the operations
	// stuck in them return. It must be safe to call more than once.
	Abort func()
}

// watch waits for wg. When wg is not done within limit, or Stop ends
// first, it sets aborted, calls Abort and waits abortGrace more. It reports
// whether it aborted, and whether wg was done in the end.
func (w Watchdog) watch(wg *sync.WaitGroup, limit time.Duration, aborted *atomic.Bool) (didAbort, finished bool) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	var stop <-chan struct{}
	if w.Stop != nil {
		stop = w.Stop.Done()
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
		return false, true
	case <-timer.C:
	case <-stop:
	}
	aborted.Store(true)
	if w.Abort != nil {
		w.Abort()
	}
	select {
	case <-done:
		return true, true
	case <-time.After(abortGrace):
		return true, false
	}
}
