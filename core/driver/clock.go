package driver

import "time"

// Clock is the source of time for validity computations and retry waits.
// Tests inject a manual clock (see backends/memory) to move time by hand.
// Durations are measured by subtracting two Now values, so the clock should
// be monotonic, as time.Now is.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned Timer is stopped first; its C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer that core uses.
type Timer interface {
	// C returns the channel on which the timer fires once (nil for a timer
	// made by AfterFunc).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// SystemClock returns the clock of the time package.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer {
	return sysTimer{time.AfterFunc(d, f)}
}

func (systemClock) String() string { return "system" }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
