package systems

import (
	"context"
	"errors"
	"fmt"

	qlgoredis "github.com/quorumlock/quorumlock/backends/goredis"
	qlredigo "github.com/quorumlock/quorumlock/backends/redigo"
	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// quorumlockStrategies are the strategies quorumlock is measured with.
var quorumlockStrategies = []struct {
	name string
	make func() core.Strategy
}{
	{"sequential", func() core.Strategy { return strategies.Sequential() }},
	{"parallel", func() core.Strategy { return strategies.Parallel() }},
	{"failfast", func() core.Strategy { return strategies.FailFast() }},
}

// openQuorumlock returns the Open of quorumlock over driver drv with the
// strategy that strategy makes, other options at their defaults.
func openQuorumlock(drv string, strategy func() core.Strategy) func([]string) (Instance, error) {
	return func(addrs []string) (Instance, error) {
		nodes := make([]core.Node, len(addrs))
		var cl closers
		switch drv {
		case "goredis":
			clients, c := goredisClients(addrs)
			cl = c
			for i, client := range clients {
				n, err := qlgoredis.New(client)
				if err != nil {
					return nil, errors.Join(err, cl.close())
				}
				nodes[i] = n
			}
		case "redigo":
			pools, c := redigoPools(addrs)
			cl = c
			for i, pool := range pools {
				n, err := qlredigo.New(pool, qlredigo.WithName(addrs[i]))
				if err != nil {
					return nil, errors.Join(err, cl.close())
				}
				nodes[i] = n
			}
		case "rueidis":
			clients, c, err := rueidisClients(addrs)
			if err != nil {
				return nil, err
			}
			cl = c
			for i, client := range clients {
				n, err := qlrueidis.New(client)
				if err != nil {
					return nil, errors.Join(err, cl.close())
				}
				nodes[i] = n
			}
		default:
			return nil, fmt.Errorf("quorumlock: unknown driver %q", drv)
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
