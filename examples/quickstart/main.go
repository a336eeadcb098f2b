// Quickstart shows quorumlock in a few seconds, with nothing to set up:
//
//	go run ./examples/quickstart
//
// It starts five in-process Redis servers (miniredis, reached over real TCP
// through go-redis), then: several workers contend for one key and each
// reports the validity it got; two of the five nodes go down and locks are
// still granted (3 of 5 is a quorum); a third goes down and the Locker
// answers with the outage error, naming each node's fate.
//
// To run it against your own independent Redis masters instead:
//
//	REDIS_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 go run ./examples/quickstart
//
// Real servers are not stopped: the program closes its own connections to
// them instead. It exits 0 when everything behaved as expected.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/core"
)

// quiet drops go-redis's own log lines about nodes we took down on purpose;
// the program reports each node's error itself.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quiet{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var addrs []string
	if env := strings.TrimSpace(os.Getenv("REDIS_ADDRS")); env != "" {
		for _, a := range strings.Split(env, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
	}
	if err := run(ctx, os.Stdout, addrs); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart: FAILED:", err)
		os.Exit(1)
	}
}

// cluster is the set of nodes the demo runs on, and a way to take one down.
type cluster struct {
	embedded []*miniredis.Miniredis // nil when running on REDIS_ADDRS
	clients  []*redis.Client
	nodes    []core.Node
}

func (c *cluster) down(i int) {
	if c.embedded != nil {
		c.embedded[i].Close() // the server stops: connections are refused
		return
	}
	_ = c.clients[i].Close() // we cannot stop your server: cut our own link
}

func (c *cluster) close() {
	for _, cl := range c.clients {
		_ = cl.Close()
	}
	for _, m := range c.embedded {
		m.Close()
	}
}

func newCluster(addrs []string) (*cluster, error) {
	c := &cluster{}
	if len(addrs) == 0 {
		for range 5 {
			m, err := miniredis.Run()
			if err != nil {
				c.close()
				return nil, err
			}
			c.embedded = append(c.embedded, m)
			addrs = append(addrs, m.Addr())
		}
	}
	for _, addr := range addrs {
		client := redis.NewClient(goredis.ClientOptions(addr))
		c.clients = append(c.clients, client)
		node, err := goredis.New(client)
		if err != nil {
			c.close()
			return nil, err
		}
		c.nodes = append(c.nodes, node)
	}
	return c, nil
}

func run(ctx context.Context, out io.Writer, addrs []string) error {
	c, err := newCluster(addrs)
	if err != nil {
		return err
	}
	defer c.close()

	locker, err := core.New(c.nodes,
		core.WithNodeTimeout(100*time.Millisecond),
		core.WithRetryDelay(core.JitterDelay(5*time.Millisecond, 20*time.Millisecond)),
	)
	if err != nil {
		return err
	}
	defer locker.Close()

	n, q := len(c.nodes), locker.Quorum()
	where := "embedded miniredis servers"
	if c.embedded == nil {
		where = "servers from REDIS_ADDRS"
	}
	fmt.Fprintf(out, "quorumlock quickstart: %d %s, TTL %v, quorum %d of %d\n\n", n, where, locker.TTL(), q, n)

	const key = "quickstart:orders:42"
	if err := contend(ctx, out, locker, key); err != nil {
		return err
	}

	// Take down as many nodes as a quorum can spare: locks are still granted.
	spare := n - q
	for i := range spare {
		c.down(i)
	}
	fmt.Fprintf(out, "\n%d of %d nodes down:\n", spare, n)
	lock, err := locker.Acquire(ctx, key)
	if err != nil {
		return fmt.Errorf("with %d of %d nodes down the lock should still be granted: %w", spare, n, err)
	}
	fmt.Fprintf(out, "  acquired %q on the remaining %d nodes, validity %v\n", key, n-spare, lock.Validity().Round(time.Millisecond))
	if err := lock.Release(ctx); err != nil {
		return fmt.Errorf("release with %d nodes down: %w", spare, err)
	}
	fmt.Fprintln(out, "  released")

	// One more down and no quorum is possible: an outage, said as such.
	c.down(spare)
	fmt.Fprintf(out, "\n%d of %d nodes down:\n", spare+1, n)
	_, err = locker.TryAcquire(ctx, key)
	if !errors.Is(err, core.ErrUnavailable) {
		return fmt.Errorf("with %d of %d nodes down, want core.ErrUnavailable, got %v", spare+1, n, err)
	}
	fmt.Fprintln(out, "  refused, as it must be: errors.Is(err, core.ErrUnavailable) == true")
	var qe *core.QuorumError
	if errors.As(err, &qe) {
		for _, r := range qe.Nodes {
			line := fmt.Sprintf("  node %d %-18s %s", r.Index, r.Node, r.Outcome)
			if r.Err != nil {
				line += ": " + r.Err.Error()
			}
			fmt.Fprintln(out, line)
		}
	}
	fmt.Fprintln(out, "\nquickstart: all checks passed")
	return nil
}

// contend has four workers take the lock twice each; the atomic counter
// proves no two of them were ever inside at once.
func contend(ctx context.Context, out io.Writer, locker *core.Locker, key string) error {
	fmt.Fprintf(out, "4 workers contend for %q:\n", key)
	var (
		inside  atomic.Int32
		overlap atomic.Bool
		mu      sync.Mutex // keeps the printed lines whole
		wg      sync.WaitGroup
		errs    = make(chan error, 4)
	)
	for w := 1; w <= 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				lock, err := locker.Acquire(ctx, key)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				if inside.Add(1) > 1 {
					overlap.Store(true)
				}
				mu.Lock()
				fmt.Fprintf(out, "  worker %d holds the lock, validity %v\n", w, lock.Validity().Round(time.Millisecond))
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // the work the lock protects
				inside.Add(-1)
				if err := lock.Release(ctx); err != nil {
					errs <- fmt.Errorf("worker %d release: %w", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if overlap.Load() {
		return errors.New("two workers held the lock at once")
	}
	fmt.Fprintln(out, "  8 acquisitions, never two holders at once")
	return nil
}
