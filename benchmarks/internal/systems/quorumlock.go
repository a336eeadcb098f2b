package systems

import (
	"context"
	"errors"
	"fmt"

	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	qlgoredis "github.com/quorumlock/quorumlock/backends/goredis"
	qlredigo "github.com/quorumlock/quorumlock/backends/redigo"
	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// quorumlockStrategies are the strategies quorumlock is measured with.
var quorumlockStrategies = []struct {
	name string
	make func() strategies.Strategy
}{
	{"sequential", func() strategies.Strategy { return strategies.Sequential() }},
	{"parallel", func() strategies.Strategy { return strategies.Parallel() }},
	{"failfast", func() strategies.Strategy { return strategies.FailFast() }},
}

// openQuorumlock returns the Open of quorumlock over driver drv with the
// strategy that strategy makes, other options at their defaults.
func openQuorumlock(drv string, strategy func() strategies.Strategy) func([]string) (Instance, error) {
	return func(addrs []string) (Instance, error) {
		nodes, cl, err := perServer[core.Node]{
			goredis: func(c *goredis.Client, _ string) (core.Node, error) { return qlgoredis.New(c) },
			redigo: func(p *redigo.Pool, addr string) (core.Node, error) {
				return qlredigo.New(p, qlredigo.WithName(addr))
			},
			rueidis: func(c rueidis.Client, _ string) (core.Node, error) { return qlrueidis.New(c) },
			valkey:  func(c valkey.Client, _ string) (core.Node, error) { return qlvalkey.New(c) },
		}.open(drv, addrs)
		if err != nil {
			return nil, fmt.Errorf("quorumlock: %w", err)
		}
		locker, err := core.New(nodes, core.WithStrategy(strategy()))
		if err != nil {
			return nil, errors.Join(err, cl.close())
		}
		return &quorumlockInstance{locker: locker, clients: cl}, nil
	}
}

type quorumlockInstance struct {
	locker  *core.Locker
	clients closers
}

func (q *quorumlockInstance) Acquire(ctx context.Context, key string) (Held, error) {
	lock, err := q.locker.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return lock, nil
}

func (q *quorumlockInstance) Contender(key string) Acquirer {
	return &quorumlockContender{q.locker, key}
}

// Close closes the Locker first (it releases what is still held), then the
// clients, which the nodes never close.
func (q *quorumlockInstance) Close() error {
	return errors.Join(q.locker.Close(), q.clients.close())
}

type quorumlockContender struct {
	locker *core.Locker
	key    string
}

func (c *quorumlockContender) Acquire(ctx context.Context) (Held, error) {
	lock, err := c.locker.Acquire(ctx, c.key)
	if err != nil {
		return nil, err
	}
	return lock, nil
}
