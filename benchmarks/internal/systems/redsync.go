package systems

import (
	"context"
	"errors"
	"fmt"

	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	rsredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	rsrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"
)

// openRedsync returns the Open of redsync v4 over driver drv: one redsync
// pool per server, and rs.NewMutex(key) with redsync's default options
// (8 s expiry, 32 tries 50-250 ms apart, quorum N/2+1).
func openRedsync(drv string) func([]string) (Instance, error) {
	return func(addrs []string) (Instance, error) {
		pools, cl, err := perServer[rsredis.Pool]{
			goredis: func(c *goredis.Client, _ string) (rsredis.Pool, error) { return rsgoredis.NewPool(c), nil },
			redigo:  func(p *redigo.Pool, _ string) (rsredis.Pool, error) { return rsredigo.NewPool(p), nil },
			rueidis: func(c rueidis.Client, _ string) (rsredis.Pool, error) {
				return rsrueidis.NewPool(rueidiscompat.NewAdapter(c)), nil
			},
		}.open(drv, addrs)
		if err != nil {
			return nil, fmt.Errorf("redsync: %w", err)
		}
		return &redsyncInstance{rs: redsync.New(pools...), clients: cl}, nil
	}
}

type redsyncInstance struct {
	rs      *redsync.Redsync
	clients closers
}

// Acquire makes a Mutex for key, as a caller of redsync must for every key,
// and locks it.
func (r *redsyncInstance) Acquire(ctx context.Context, key string) (Held, error) {
	m := r.rs.NewMutex(key)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return redsyncHeld{m}, nil
}

// Contender makes one Mutex on key, which the goroutine then locks and
// unlocks again and again (a Mutex is not safe for concurrent use).
func (r *redsyncInstance) Contender(key string) Acquirer {
	return &redsyncContender{r.rs.NewMutex(key)}
}

func (r *redsyncInstance) Close() error { return r.clients.close() }

type redsyncContender struct{ m *redsync.Mutex }

// Acquire locks the Mutex. redsync returns ErrFailed, not the context's
// error, when ctx ends while it waits; the measurement tells those apart by
// looking at its own context.
func (c *redsyncContender) Acquire(ctx context.Context) (Held, error) {
	if err := c.m.LockContext(ctx); err != nil {
		return nil, err
	}
	return redsyncHeld{c.m}, nil
}

// redsyncHeld is a locked Mutex. A struct of one pointer fits in an
// interface without an allocation.
type redsyncHeld struct{ m *redsync.Mutex }

// errNotUnlocked is returned when UnlockContext reports failure without an
// error.
var errNotUnlocked = errors.New("redsync: unlock reached no quorum")

func (h redsyncHeld) Release(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if !ok {
		if err == nil {
			err = errNotUnlocked
		}
		return err
	}
	return nil
}
