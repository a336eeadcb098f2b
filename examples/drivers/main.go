// Drivers shows that a quorumlock lock is the same lock whichever Redis
// client takes it:
//
//	go run ./examples/drivers
//
// It starts three in-process Redis servers (miniredis, reached over real
// TCP) and builds, over the same three servers, one Locker per driver:
// go-redis (backends/goredis), redigo (backends/redigo), rueidis
// (backends/rueidis) and valkey-go (backends/valkey). First each Locker
// takes and releases one key. Then, for each driver in turn, the key is
// held through that driver and the others try it once (TryAcquire): all
// must be refused with core.ErrNotAcquired, because every byte sent to
// Redis (key, random value, scripts) is decided by core, not by the
// driver. Once it is released, the next driver takes it at once.
//
// rueidis against miniredis: rueidis sends HELLO 3 (RESP3), which miniredis
// speaks, and the backend's ClientOption turns client-side caching off
// (DisableCache), so no CLIENT TRACKING is needed. miniredis also answers
// CLUSTER SLOTS, which would make rueidis treat each server as a one-node
// Redis Cluster; ForceSingleClient, which an independent master wants
// anyway, keeps it a plain single-server client. valkey-go, a fork of
// rueidis, is set up the same way.
//
// To run it against your own independent Redis masters instead:
//
//	REDIS_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 go run ./examples/drivers
//
// It exits 0 when everything behaved as expected, and 1 otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/backends/redigo"
	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/examples/internal/demo"
	"github.com/quorumlock/quorumlock/strategies"
)

// key is the lock every step takes; ttl its time-to-live.
const (
	key = "drivers:invoice:7"
	ttl = 10 * time.Second
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if err := run(ctx, os.Stdout, demo.ParseAddrs(os.Getenv("REDIS_ADDRS"))); err != nil {
		fmt.Fprintln(os.Stderr, "drivers: FAILED:", err)
		if errors.Is(err, core.ErrNotAcquired) {
			fmt.Fprintf(os.Stderr, "drivers: another client holds %q on your servers; "+
				"a lock left by an interrupted run expires within the TTL (%v)\n", key, ttl)
		}
		os.Exit(1)
	}
}

// run is the whole demonstration. With no addrs it starts three embedded
// servers; otherwise it uses the Redis masters at addrs.
func run(ctx context.Context, out io.Writer, addrs []string) error {
	servers, err := demo.Start(addrs, 3)
	if err != nil {
		return err
	}
	defer servers.Close() // runs last: after the drivers are closed

	// One Locker per driver, all over the same servers.
	drivers, err := newDrivers(servers.Addrs())
	if err != nil {
		return err
	}
	defer closeDrivers(drivers)

	fmt.Fprintf(out, "quorumlock drivers: %s, one Locker per driver, key %q\n", servers.Where(), key)

	// 1. Each driver on its own: acquire, then release.
	fmt.Fprintln(out, "\neach driver takes the lock and releases it:")
	for _, d := range drivers {
		if err := acquireAndRelease(ctx, out, d); err != nil {
			return err
		}
	}

	// 2. Held through one driver, refused through the others; released,
	// taken at once through the next.
	fmt.Fprintln(out, "\nheld through one driver, tried once (TryAcquire) through the others:")
	for i, holder := range drivers {
		next := drivers[(i+1)%len(drivers)]
		if err := holdThenHandOver(ctx, out, drivers, holder, next); err != nil {
			return err
		}
	}

	fmt.Fprintln(out, "\ndrivers: all checks passed")
	return nil
}

// newDrivers builds one driver per client library, each over the servers
// at addrs. On an error it closes the drivers it built.
func newDrivers(addrs []string) ([]*driver, error) {
	var drivers []*driver
	for _, build := range []func([]string) (*driver, error){newGoRedis, newRedigo, newRueidis, newValkey} {
		d, err := build(addrs)
		if err != nil {
			closeDrivers(drivers)
			return nil, err
		}
		drivers = append(drivers, d)
	}
	return drivers, nil
}

// closeDrivers closes each driver: its Locker (which releases what it
// still holds), then its clients.
func closeDrivers(drivers []*driver) {
	for _, d := range drivers {
		d.close()
	}
}

// acquireAndRelease takes the lock through d alone, then releases it.
func acquireAndRelease(ctx context.Context, out io.Writer, d *driver) error {
	lock, err := d.locker.Acquire(ctx, key)
	if err != nil {
		return fmt.Errorf("%s: acquire: %w", d.name, err)
	}
	validity := lock.Validity().Round(time.Millisecond)
	if err := lock.Release(ctx); err != nil {
		return fmt.Errorf("%s: release: %w", d.name, err)
	}
	fmt.Fprintf(out, "  %-8s %-42s acquired (validity %v), released\n", d.name, d.client, validity)
	return nil
}

// holdThenHandOver takes the lock through holder, checks that every other
// driver is refused it, releases it, and checks that next takes it at
// once.
func holdThenHandOver(ctx context.Context, out io.Writer, drivers []*driver, holder, next *driver) error {
	lock, err := holder.locker.Acquire(ctx, key)
	if err != nil {
		return fmt.Errorf("%s: acquire: %w", holder.name, err)
	}
	refused, err := othersRefused(ctx, drivers, holder)
	if err != nil {
		_ = lock.Release(ctx)
		return err
	}
	if err := lock.Release(ctx); err != nil {
		return fmt.Errorf("%s: release: %w", holder.name, err)
	}
	taken, err := next.locker.TryAcquire(ctx, key)
	if err != nil {
		return fmt.Errorf("%s: the lock released by %s should be free: %w", next.name, holder.name, err)
	}
	if err := taken.Release(ctx); err != nil {
		return fmt.Errorf("%s: release: %w", next.name, err)
	}
	fmt.Fprintf(out, "  held through %-8s %s refused (ErrNotAcquired); released, then taken through %s\n",
		holder.name, strings.Join(refused[:len(refused)-1], ", ")+" and "+refused[len(refused)-1], next.name)
	return nil
}

// othersRefused tries the lock once through each driver but holder, which
// holds it, and returns their names: each must be refused with
// core.ErrNotAcquired.
func othersRefused(ctx context.Context, drivers []*driver, holder *driver) ([]string, error) {
	var refused []string
	for _, other := range drivers {
		if other == holder {
			continue
		}
		stolen, err := other.locker.TryAcquire(ctx, key)
		if err == nil {
			_ = stolen.Release(ctx)
			return nil, fmt.Errorf("%s acquired %q while %s held it", other.name, key, holder.name)
		}
		if !errors.Is(err, core.ErrNotAcquired) {
			return nil, fmt.Errorf("%s: want core.ErrNotAcquired while %s holds the lock, got %w", other.name, holder.name, err)
		}
		refused = append(refused, other.name)
	}
	return refused, nil
}

// driver is one Locker over the servers through one Redis client library.
type driver struct {
	name   string // the backend package
	client string // what client it uses, for the narration
	locker *core.Locker
	closes []func() // the clients, closed after the Locker
}

func (d *driver) close() {
	if d.locker != nil {
		_ = d.locker.Close()
	}
	for _, c := range d.closes {
		c()
	}
}

// newLocker finishes d with a Locker over nodes, or closes what d holds.
func (d *driver) newLocker(nodes []core.Node) (*driver, error) {
	locker, err := core.New(nodes,
		core.WithTTL(ttl),
		core.WithNodeTimeout(200*time.Millisecond), // loopback answers in well under 1 ms
		core.WithRetryDelay(strategies.JitterDelay(5*time.Millisecond, 20*time.Millisecond)),
	)
	if err != nil {
		d.close()
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	d.locker = locker
	return d, nil
}

// newGoRedis builds the go-redis Locker: one *redis.Client per server, with
// the options the backend recommends (ContextTimeoutEnabled, no retries).
func newGoRedis(addrs []string) (*driver, error) {
	d := &driver{name: "goredis", client: "a go-redis *redis.Client per server"}
	var nodes []core.Node
	for _, addr := range addrs {
		client := redis.NewClient(goredis.ClientOptions(addr))
		d.closes = append(d.closes, func() { _ = client.Close() })
		node, err := goredis.New(client)
		if err != nil {
			d.close()
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return d.newLocker(nodes)
}

// newRedigo builds the redigo Locker: one *redis.Pool per server, dialling
// with the caller's context. A pool cannot tell its address, so each node
// is named after it.
func newRedigo(addrs []string) (*driver, error) {
	d := &driver{name: "redigo", client: "a redigo *redis.Pool per server"}
	var nodes []core.Node
	for _, addr := range addrs {
		pool := redigo.NewPool(addr, redigoredis.DialConnectTimeout(2*time.Second))
		d.closes = append(d.closes, func() { _ = pool.Close() })
		node, err := redigo.New(pool, redigo.WithName(addr))
		if err != nil {
			d.close()
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return d.newLocker(nodes)
}

// newRueidis builds the rueidis Locker: one single-server rueidis.Client
// per server, from the backend's ClientOption (no client-side cache, no
// retries, one pipelined connection).
func newRueidis(addrs []string) (*driver, error) {
	d := &driver{name: "rueidis", client: "a single-server rueidis.Client per server"}
	var nodes []core.Node
	for _, addr := range addrs {
		o := qlrueidis.ClientOption(addr)
		o.ForceSingleClient = true // an independent master, never cluster detection
		client, err := rueidis.NewClient(o)
		if err != nil {
			d.close()
			return nil, fmt.Errorf("rueidis: no connection to the Redis server at %s: %w", addr, err)
		}
		d.closes = append(d.closes, client.Close)
		node, err := qlrueidis.New(client, qlrueidis.WithName(addr))
		if err != nil {
			d.close()
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return d.newLocker(nodes)
}

// newValkey builds the valkey-go Locker: one single-server valkey.Client
// per server, from the backend's ClientOption, as for rueidis.
func newValkey(addrs []string) (*driver, error) {
	d := &driver{name: "valkey", client: "a single-server valkey.Client per server"}
	var nodes []core.Node
	for _, addr := range addrs {
		o := qlvalkey.ClientOption(addr)
		o.ForceSingleClient = true // an independent master, never cluster detection
		client, err := valkey.NewClient(o)
		if err != nil {
			d.close()
			return nil, fmt.Errorf("valkey: no connection to the server at %s: %w", addr, err)
		}
		d.closes = append(d.closes, client.Close)
		node, err := qlvalkey.New(client, qlvalkey.WithName(addr))
		if err != nil {
			d.close()
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return d.newLocker(nodes)
}
