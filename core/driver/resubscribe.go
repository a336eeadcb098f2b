package driver

import (
	"context"
	"sync/atomic"
)

// ReceiveFunc is one subscription attempt of a Watch: it subscribes to the
// watched channel, calls subscribed when the server confirms it and
// message with each message published on the channel, and returns when
// the subscription ends: the connection was lost (the driver's error, or
// nil), or ctx ended.
type ReceiveFunc func(ctx context.Context, subscribed func(), message func(string)) error

// Resubscribe implements Watcher.Watch over receive. It runs receive on a
// goroutine of its own and returns once the first subscription is
// confirmed, or with the error of the first attempt, or ctx's. Then, until
// stop, it subscribes again whenever receive returns, paced by Backoff, and
// calls notify("") after each new confirmation, since a release may have
// been missed; done(err) reports that no attempt can succeed any more (the
// client was closed), which ends the goroutine. stop ends the context
// receive runs with and waits for the goroutine; it may be called more
// than once.
func Resubscribe(ctx context.Context, receive ReceiveFunc, notify func(string), done func(err error) bool) (stop func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	confirmed, failed, ended := make(chan struct{}), make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		var live atomic.Bool // confirmed once: messages count
		var backoff Backoff
		for {
			var subscribed atomic.Bool // this attempt was confirmed
			err := receive(rctx, func() {
				switch {
				case !subscribed.CompareAndSwap(false, true):
				case live.CompareAndSwap(false, true):
					close(confirmed)
				default:
					notify("") // subscribed again: a release may have been missed
				}
			}, func(m string) {
				if live.Load() {
					notify(m)
				}
			})
			if !live.Load() && err != nil && rctx.Err() == nil {
				failed <- err
				return
			}
			if subscribed.Load() {
				backoff.Reset()
			}
			if rctx.Err() != nil || done(err) || !backoff.Wait(rctx.Done()) {
				return
			}
		}
	}()
	stop = func() { cancel(); <-ended }
	select {
	case <-confirmed:
		return stop, nil
	case err = <-failed:
	case <-ctx.Done():
		err = ctx.Err()
	}
	stop()
	return nil, err
}
