package systems

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// openRueidislock opens rueidislock (the rueidislock package of the rueidis
// v1.0.79 module, not a module of its own) over the single server at
// addrs[0]: NewLocker with KeyMajority 1 (one key on one server, so a
// majority of 1), defaults otherwise (5 s key validity extended every
// 2.5 s, key prefix "rueidislock", 20 ms per-key timeout). rueidislock
// builds its own client from a rueidis.ClientOption; it gets rueidis's
// defaults, because rueidislock learns of releases by another Locker
// through client-side caching (CLIENT TRACKING invalidations), which
// quorumlock's client settings turn off (and with them off, rueidislock
// falls back to polling every 20 ms).
//
// What its API does, read from lock.go of v1.0.79:
//
//   - Acquire is WithContext(ctx, name), which returns a context that ends
//     when the lock is lost, and a CancelFunc that is the release.
//   - Release is that CancelFunc, and it is synchronous: it cancels the
//     lock's context and then waits until the goroutine that keeps the key
//     (one per key) has run its compare-and-delete script, so the key is
//     gone when it returns. It cannot report errors: a CancelFunc returns
//     nothing, and the script's error is discarded. Release therefore
//     always returns nil here.
//   - The lock lives as long as the context given to WithContext: when that
//     context ends, the lock is released in the background. The contended
//     measurements cancel their contexts to stop waiting acquisitions, so
//     the Acquire below detaches a granted lock from the caller's context,
//     as a caller that wants to stop waiting but keep a granted lock must.
func openRueidislock(addrs []string) (Instance, error) {
	if len(addrs) != 1 {
		return nil, fmt.Errorf("rueidislock: measured over one server only, not %d", len(addrs))
	}
	locker, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: addrs},
		KeyMajority:  1,
	})
	if err != nil {
		return nil, fmt.Errorf("rueidislock: %w", err)
	}
	return &rueidislockInstance{locker}, nil
}

type rueidislockInstance struct{ locker rueidislock.Locker }

func (r *rueidislockInstance) Acquire(ctx context.Context, key string) (Held, error) {
	if ctx.Done() == nil {
		// A context that never ends: nothing to detach from.
		_, release, err := r.locker.WithContext(ctx, key)
		if err != nil {
			return nil, err
		}
		return rueidislockHeld{release}, nil
	}
	// Wait under a context that ctx cancels only until the lock is granted.
	lctx, lcancel := context.WithCancel(context.WithoutCancel(ctx))
	detach := context.AfterFunc(ctx, lcancel)
	_, release, err := r.locker.WithContext(lctx, key)
	if !detach() {
		// ctx ended while waiting (and lctx with it).
		if err == nil {
			release()
		}
		lcancel()
		return nil, context.Cause(ctx)
	}
	if err != nil {
		lcancel()
		return nil, err
	}
	return rueidislockHeld{func() { release(); lcancel() }}, nil
}

func (r *rueidislockInstance) Contender(key string) Acquirer {
	return &rueidislockContender{r, key}
}

// Close closes the Locker and its client.
func (r *rueidislockInstance) Close() error {
	r.locker.Close()
	return nil
}

type rueidislockContender struct {
	r   *rueidislockInstance
	key string
}

func (c *rueidislockContender) Acquire(ctx context.Context) (Held, error) {
	return c.r.Acquire(ctx, c.key)
}

// rueidislockHeld holds the CancelFunc that releases the lock.
type rueidislockHeld struct{ release func() }

// Release calls the CancelFunc, which returns once the key is deleted, and
// reports no error (rueidislock has no way to).
func (h rueidislockHeld) Release(context.Context) error {
	h.release()
	return nil
}
