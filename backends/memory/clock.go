package memory

import (
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
)

// ManualClock is a driver.Clock that moves only when told to: give it to
// nodes (WithClock) to expire their keys by hand. For a Locker and its
// nodes together, testing/synctest fakes the system clock instead.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

var _ driver.Clock = (*ManualClock)(nil)

// NewManualClock returns a clock that reads start until advanced.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires the timers that are due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	pending := c.timers[:0]
	var due []*manualTimer
	for _, t := range c.timers {
		if t.stopped {
			continue
		}
		if !t.when.After(now) {
			due = append(due, t)
		} else {
			pending = append(pending, t)
		}
	}
	c.timers = pending
	c.mu.Unlock()
	for _, t := range due {
		if t.fn != nil {
			go t.fn()
		} else {
			t.ch <- now
		}
	}
}

// Timers returns how many timers are waiting to fire: a test can poll it to
// know that a goroutine is waiting on the clock before advancing it.
func (c *ManualClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

// NewTimer returns a timer that fires once the clock has advanced by d.
func (c *ManualClock) NewTimer(d time.Duration) driver.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{clock: c, when: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// AfterFunc calls f in its own goroutine once the clock has advanced by d.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) driver.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{clock: c, when: c.now.Add(d), fn: f}
	if d <= 0 {
		go f()
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

type manualTimer struct {
	clock   *ManualClock
	when    time.Time
	fn      func() // AfterFunc's; nil for NewTimer's
	ch      chan time.Time
	stopped bool // guarded by clock.mu
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	for _, p := range t.clock.timers {
		if p == t && !t.stopped {
			t.stopped = true
			return true
		}
	}
	return false
}
