package conformance

import (
	"time"

	"go.uber.org/goleak"
)

// LeakGrace is how long FindLeaks lets goroutines end before goleak
// judges them: drivers finish some of their closing in the background. It
// is enough for go-redis's once-a-second probe, and for the
// connections that a rueidis cluster client's refresh dropped, which it
// closes five seconds later in a goroutine of its own (Close does not
// wait for it).
const LeakGrace = 6 * time.Second

// FindLeaks polls goleak.Find until it reports no goroutine or grace has
// passed, and returns its last report: nil when nothing outlived the grace.
func FindLeaks(grace time.Duration, opts ...goleak.Option) error {
	err := goleak.Find(opts...)
	for deadline := time.Now().Add(grace); err != nil && time.Now().Before(deadline); err = goleak.Find(opts...) {
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
