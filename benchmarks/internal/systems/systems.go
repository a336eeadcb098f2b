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
)

// TTL is the lock time-to-live of every system that lets the caller choose
// it per lock (bsm/redislock and the floors); the others keep their
// defaults (quorumlock 10 s, redsync 8 s, rueidislock 5 s, extended in the
// background).
const TTL = 10_000 // milliseconds

// NodeTimeout bounds each call of a floor to a node in the degraded modes:
// quorumlock's default node timeout. (quorumlock keeps its default;
// redsync bounds each try of an acquisition by 5% of its 8 s expiry, its
// default, and its releases only by the caller's context.)
const NodeTimeout = core.DefaultNodeTimeout

// Held is a lock that an Instance granted.
type Held interface {
	// Release gives the lock up. It returns once the system says the lock
	// is released (rueidislock reports no errors; see its Instance).
	Release(ctx context.Context) error
}

// Acquirer takes one key again and again: what one goroutine of a
// contended measurement uses. It keeps whatever per-key object the
// system's API has (redsync's Mutex), and is not safe for concurrent use.
type Acquirer interface {
	// Acquire waits for the lock, in the system's own way, until it is
	// granted, the system gives up, or ctx ends.
	Acquire(ctx context.Context) (Held, error)
}

// Instance is one client-side instance of a system over N servers: what
// one process would hold. Acquire and Contender are safe for concurrent
// use.
type Instance interface {
	// Acquire takes the lock on key, waiting in the system's default way
	// if it is held (bsm/redislock's default is a single try).
	Acquire(ctx context.Context, key string) (Held, error)
	// Contender returns what one goroutine uses to take key repeatedly in
	// the contended measurements, with the waiting those need
	// (bsm/redislock gets a retry strategy there).
	Contender(key string) Acquirer
	// Close closes everything the instance made: lockers and clients.
	Close() error
}

// System is one contestant of the benchmark.
type System struct {
	// Name is the system's name in tables, filters and JSON records.
	Name string
	// Driver is the Redis client library underneath: goredis, redigo,
	// rueidis or valkey (valkey-go, quorumlock's systems only).
	Driver string
	// SingleNode marks systems that lock on one server only
	// (rueidislock, bsm/redislock): they are measured with N=1 alone.
	SingleNode bool
	// Floor marks the library-free floors, measured only in the
	// uncontended modes (healthy and degraded) and the parallel mode.
	Floor bool
	// Open makes a fresh Instance over the servers at addrs, with its own
	// clients.
	Open func(addrs []string) (Instance, error)
	// OpenDegraded, when set, is what the degraded modes open instead of
	// Open: the floors with NodeTimeout.
	OpenDegraded func(addrs []string) (Instance, error)
}

// Supports reports whether the system is measured over n servers.
func (s System) Supports(n int) bool { return !s.SingleNode || n == 1 }

// OpenFor makes a fresh Instance for a measurement of a healthy mode, or
// of a degraded one (through OpenDegraded, when the system has one).
func (s System) OpenFor(addrs []string, degraded bool) (Instance, error) {
	if degraded && s.OpenDegraded != nil {
		return s.OpenDegraded(addrs)
	}
	return s.Open(addrs)
}

// All returns every system, in the order of the report's tables.
func All() []System {
	var all []System
	for _, drv := range []string{"goredis", "redigo", "rueidis", "valkey"} {
		for _, st := range quorumlockStrategies {
			all = append(all, System{
				Name:   "quorumlock-" + drv + "-" + st.name,
				Driver: drv,
				Open:   openQuorumlock(drv, st.make),
			})
		}
	}
	for _, drv := range []string{"goredis", "redigo", "rueidis"} {
		all = append(all, System{Name: "redsync-" + drv, Driver: drv, Open: openRedsync(drv)})
	}
	all = append(all,
		System{Name: "rueidislock", Driver: "rueidis", SingleNode: true, Open: openRueidislock},
		System{Name: "redislock", Driver: "goredis", SingleNode: true, Open: openRedislock},
		System{Name: "floor-goredis", Driver: "goredis", Floor: true,
			Open: openFloor("goredis", 0), OpenDegraded: openFloor("goredis", NodeTimeout)},
		System{Name: "floor-rueidis", Driver: "rueidis", Floor: true,
			Open: openFloor("rueidis", 0), OpenDegraded: openFloor("rueidis", NodeTimeout)},
	)
	return all
}

// closers collects what an Instance must close, in order.
type closers []func() error

func (c closers) close() error {
	var errs []error
	for _, f := range c {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// perServer makes a system's per-server value (a node, a pool) from a
// client of one server, for each driver the system runs over: the driver's
// function gets the client and the server's address.
type perServer[T any] struct {
	goredis func(c *goredis.Client, addr string) (T, error)
	redigo  func(p *redigo.Pool, addr string) (T, error)
	rueidis func(c rueidis.Client, addr string) (T, error)
	valkey  func(c valkey.Client, addr string) (T, error)
}

// open makes one client of driver drv per address (with quorumlock's
// settings) and one T from each, and returns them with the clients'
// closers. A driver without a function is an error; on any error it
// closes the clients it made.
func (ps perServer[T]) open(drv string, addrs []string) ([]T, closers, error) {
	var (
		cl closers
		mk func(i int) (T, error)
	)
	switch {
	case drv == "goredis" && ps.goredis != nil:
		clients, c := goredisClients(addrs)
		cl, mk = c, func(i int) (T, error) { return ps.goredis(clients[i], addrs[i]) }
	case drv == "redigo" && ps.redigo != nil:
		pools, c := redigoPools(addrs)
		cl, mk = c, func(i int) (T, error) { return ps.redigo(pools[i], addrs[i]) }
	case drv == "rueidis" && ps.rueidis != nil:
		clients, c, err := rueidisClients(addrs)
		if err != nil {
			return nil, nil, err
		}
		cl, mk = c, func(i int) (T, error) { return ps.rueidis(clients[i], addrs[i]) }
	case drv == "valkey" && ps.valkey != nil:
		clients, c, err := valkeyClients(addrs)
		if err != nil {
			return nil, nil, err
		}
		cl, mk = c, func(i int) (T, error) { return ps.valkey(clients[i], addrs[i]) }
	default:
		return nil, nil, fmt.Errorf("unknown driver %q", drv)
	}
	out := make([]T, len(addrs))
	for i := range out {
		v, err := mk(i)
		if err != nil {
			return nil, nil, errors.Join(err, cl.close())
		}
		out[i] = v
	}
	return out, cl, nil
}

// goredisClients returns one go-redis client per address, with quorumlock's
// settings (goredis.ClientOptions).
func goredisClients(addrs []string) ([]*goredis.Client, closers) {
	clients := make([]*goredis.Client, len(addrs))
	var cl closers
	for i, a := range addrs {
		clients[i] = goredis.NewClient(qlgoredis.ClientOptions(a))
		cl = append(cl, clients[i].Close)
	}
	return clients, cl
}

// redigoPools returns one redigo pool per address, with quorumlock's
// settings (redigo.NewPool).
func redigoPools(addrs []string) ([]*redigo.Pool, closers) {
	pools := make([]*redigo.Pool, len(addrs))
	var cl closers
	for i, a := range addrs {
		pools[i] = qlredigo.NewPool(a)
		cl = append(cl, pools[i].Close)
	}
	return pools, cl
}

// rueidisClients returns one rueidis client per address, with quorumlock's
// settings (rueidis.ClientOption). On error it closes those it made.
func rueidisClients(addrs []string) ([]rueidis.Client, closers, error) {
	clients := make([]rueidis.Client, len(addrs))
	var cl closers
	for i, a := range addrs {
		c, err := rueidis.NewClient(qlrueidis.ClientOption(a))
		if err != nil {
			_ = cl.close()
			return nil, nil, fmt.Errorf("rueidis client for %s: %w", a, err)
		}
		clients[i] = c
		cl = append(cl, func() error { c.Close(); return nil })
	}
	return clients, cl, nil
}

// valkeyClients returns one valkey-go client per address, with
// quorumlock's settings (valkey.ClientOption). On error it closes those it
// made.
func valkeyClients(addrs []string) ([]valkey.Client, closers, error) {
	clients := make([]valkey.Client, len(addrs))
	var cl closers
	for i, a := range addrs {
		c, err := valkey.NewClient(qlvalkey.ClientOption(a))
		if err != nil {
			_ = cl.close()
			return nil, nil, fmt.Errorf("valkey client for %s: %w", a, err)
		}
		clients[i] = c
		cl = append(cl, func() error { c.Close(); return nil })
	}
	return clients, cl, nil
}
