package systems

import (
	"context"
	"fmt"
	"time"

	"github.com/bsm/redislock"
)

// ContendedRetry is the retry delay given to bsm/redislock in the
// contended modes: its default is a single try, which would turn every
// lost race into a failure.
const ContendedRetry = 10 * time.Millisecond

// openRedislock opens bsm/redislock over the single server at addrs[0],
// with a go-redis client of quorumlock's settings. Locks are obtained with
// a 10 s TTL; Acquire uses the default options (nil: no retry), Contender
// a linear backoff of ContendedRetry.
func openRedislock(addrs []string) (Instance, error) {
	if len(addrs) != 1 {
		return nil, fmt.Errorf("redislock: measured over one server only, not %d", len(addrs))
	}
	clients, cl := goredisClients(addrs)
	return &redislockInstance{client: redislock.New(clients[0]), clients: cl}, nil
}

type redislockInstance struct {
	client  *redislock.Client
	clients closers
}

func (r *redislockInstance) Acquire(ctx context.Context, key string) (Held, error) {
	return r.obtain(ctx, key, nil)
}

func (r *redislockInstance) obtain(ctx context.Context, key string, opt *redislock.Options) (Held, error) {
	lock, err := r.client.Obtain(ctx, key, TTL*time.Millisecond, opt)
	if err != nil {
		return nil, err
	}
	return lock, nil
}

func (r *redislockInstance) Contender(key string) Acquirer {
	return &redislockContender{r, key, &redislock.Options{RetryStrategy: redislock.LinearBackoff(ContendedRetry)}}
}

func (r *redislockInstance) Close() error { return r.clients.close() }

type redislockContender struct {
	r   *redislockInstance
	key string
	opt *redislock.Options
}

func (c *redislockContender) Acquire(ctx context.Context) (Held, error) {
	return c.r.obtain(ctx, c.key, c.opt)
}
