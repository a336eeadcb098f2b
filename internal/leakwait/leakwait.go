// Package leakwait gives goroutines a grace period to end before goleak
// judges them: drivers finish some of their closing in the background (a
// go-redis pool probes a dead server once a second until it is closed).
package leakwait

import (
	"time"

	"go.uber.org/goleak"
)

// DefaultGrace is enough for go-redis's once-a-second probe, and for the
// connections that a rueidis cluster client's refresh dropped, which it
// closes five seconds later in a goroutine of its own (Close does not
// wait for it).
const DefaultGrace = 6 * time.Second

// Find polls goleak.Find until it reports no goroutine or grace has
// passed, and returns its last report: nil when nothing outlived the grace.
func Find(grace time.Duration, opts ...goleak.Option) error {
	err := goleak.Find(opts...)
	for deadline := time.Now().Add(grace); err != nil && time.Now().Before(deadline); err = goleak.Find(opts...) {
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
