// Quickstart shows quorumlock in a few seconds, with nothing to set up:
//
//	go run ./examples/quickstart
//
// It starts five in-process Redis servers (miniredis, reached over real TCP
// through go-redis), then: four workers contend for one key and each reports
// the validity it got; two of the five nodes go down and locks are still
// granted (3 of 5 is a quorum); a third goes down and the Locker answers with
// the outage error, naming each node's fate.
//
// To run it against your own independent Redis masters instead (any number
// of them, not replicas of each other):
//
//	REDIS_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 go run ./examples/quickstart
//
// Real servers are not stopped: to take a node "down" the program closes its
// own connection to it. With N servers it takes down N - quorum of them, then
// one more. It exits 0 when everything behaved as expected, and 1 otherwise.
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

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/examples/internal/demo"
	"github.com/quorumlock/quorumlock/strategies"
)

// The key every step locks, the locks' time-to-live, and how the workers
// contend for the key.
const (
	key     = "quickstart:orders:42"
	ttl     = 10 * time.Second // the default, written out
	workers = 4
	rounds  = 2 // acquisitions per worker
)

func main() {
	redis.SetLogger(demo.Quiet{}) // nodes go down on purpose; the program reports each node's error itself
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	err := run(ctx, os.Stdout, demo.ParseAddrs(os.Getenv("REDIS_ADDRS")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart: FAILED:", err)
		if errors.Is(err, core.ErrNotAcquired) {
			fmt.Fprintf(os.Stderr, "quickstart: another client holds %q on your servers; "+
				"a lock left by an interrupted run expires within the TTL (%v)\n", key, ttl)
		}
		os.Exit(1)
	}
}

// run is the whole demonstration. With no addrs it starts five embedded
// servers; otherwise it uses the Redis masters at addrs.
func run(ctx context.Context, out io.Writer, addrs []string) error {
	c, err := newCluster(ctx, addrs)
	if err != nil {
		return err
	}
	defer c.close()

	locker, err := core.New(c.nodes,
		core.WithTTL(ttl),
		core.WithNodeTimeout(100*time.Millisecond), // loopback answers in well under 1 ms
		core.WithRetryDelay(strategies.JitterDelay(5*time.Millisecond, 20*time.Millisecond)),
	)
	if err != nil {
		return err
	}
	defer locker.Close() // runs before c.close: the Locker goes first

	n, q := len(c.nodes), locker.Quorum()
	fmt.Fprintf(out, "quorumlock quickstart: %s, TTL %v, quorum %d of %d\n", c.servers.Where(), locker.TTL(), q, n)

	// 1. Mutual exclusion: workers take turns on one key.
	fmt.Fprintf(out, "\n%d workers contend for %q:\n", workers, key)
	if err := contend(ctx, out, locker); err != nil {
		return err
	}

	// 2. Take down as many nodes as the quorum can spare: still granted.
	spare := n - q
	if err := acquireWithSpareDown(ctx, out, c, locker, spare); err != nil {
		return err
	}

	// 3. One more down and no quorum is possible: an outage, said as such.
	if err := refuseBelowQuorum(ctx, out, c, locker, spare); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nquickstart: all checks passed")
	return nil
}

// contend has the workers take the lock in turn. The counter of workers
// inside the critical section proves that no two ever held it at once.
func contend(ctx context.Context, out io.Writer, locker *core.Locker) error {
	var (
		inside  atomic.Int32 // workers holding the lock right now
		overlap atomic.Bool  // set if two were ever inside together
		printMu sync.Mutex   // keeps the printed lines whole
		wg      sync.WaitGroup
		errs    = make(chan error, workers)
	)
	for w := 1; w <= workers; w++ {
		wg.Go(func() {
			for range rounds {
				// Acquire retries while another worker holds the key. It
				// is not a queue: a worker that just released may win again.
				lock, err := locker.Acquire(ctx, key)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				if inside.Add(1) > 1 {
					overlap.Store(true)
				}
				printMu.Lock()
				fmt.Fprintf(out, "  worker %d holds the lock, validity %v\n", w, lock.Validity().Round(time.Millisecond))
				printMu.Unlock()
				time.Sleep(2 * time.Millisecond) // the work the lock protects
				inside.Add(-1)

				if err := lock.Release(ctx); err != nil {
					errs <- fmt.Errorf("worker %d release: %w", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if overlap.Load() {
		return errors.New("two workers held the lock at once")
	}
	fmt.Fprintf(out, "  %d acquisitions, never two holders at once\n", workers*rounds)
	return nil
}

// acquireWithSpareDown takes down nodes 0 to spare-1, as many as the
// quorum can spare, and checks that the lock is still granted.
func acquireWithSpareDown(ctx context.Context, out io.Writer, c *cluster, locker *core.Locker, spare int) error {
	n, q := len(c.nodes), locker.Quorum()
	var downed []string
	for i := range spare {
		downed = append(downed, c.down(i))
	}
	if spare == 0 {
		fmt.Fprintf(out, "\nquorum %d of %d cannot spare a node, so all stay up:\n", q, n)
	} else {
		fmt.Fprintf(out, "\n%d of %d nodes down%s:\n", spare, n, c.how(downed))
	}
	lock, err := locker.Acquire(ctx, key)
	if err != nil {
		return fmt.Errorf("with %d of %d nodes down the lock should still be granted: %w", spare, n, err)
	}
	validity := lock.Validity().Round(time.Millisecond)
	if err := lock.Release(ctx); err != nil {
		return fmt.Errorf("release with %d of %d nodes down: %w", spare, n, err)
	}
	fmt.Fprintf(out, "  acquired %q on the %s still up (validity %v), then released it\n",
		key, demo.Plural(n-spare, "node"), validity)
	return nil
}

// refuseBelowQuorum takes down node spare, one more than the quorum can
// spare, and checks that the Locker answers with the outage error; it
// prints each node's fate.
func refuseBelowQuorum(ctx context.Context, out io.Writer, c *cluster, locker *core.Locker, spare int) error {
	n := len(c.nodes)
	downed := []string{c.down(spare)}
	fmt.Fprintf(out, "\n%d of %d nodes down%s:\n", spare+1, n, c.how(downed))
	_, err := locker.TryAcquire(ctx, key)
	if !errors.Is(err, core.ErrUnavailable) {
		return fmt.Errorf("with %d of %d nodes down, want core.ErrUnavailable, got %v", spare+1, n, err)
	}
	fmt.Fprintln(out, "  refused, as it must be: errors.Is(err, core.ErrUnavailable) == true; each node:")
	var qe *core.QuorumError
	if errors.As(err, &qe) {
		printNodes(out, qe)
	}
	return nil
}

// printNodes writes one line per node of a failed round: what it did and why.
func printNodes(w io.Writer, qe *core.QuorumError) {
	for _, r := range qe.Nodes {
		line := fmt.Sprintf("  node %d %-18s %s", r.Index, r.Node, r.Outcome)
		if r.Err != nil {
			line += ": " + r.Err.Error()
		}
		fmt.Fprintln(w, line)
	}
}

// cluster is the set of nodes the demo runs on, and a way to take one down.
type cluster struct {
	servers *demo.Servers   // embedded, or those of REDIS_ADDRS
	clients []*redis.Client // one per node; the program closes them
	nodes   []core.Node
}

// newCluster starts the embedded servers (when addrs is empty), makes one
// go-redis client and one node per server, and checks that each answers.
func newCluster(ctx context.Context, addrs []string) (*cluster, error) {
	servers, err := demo.Start(addrs, 5)
	if err != nil {
		return nil, err
	}
	c := &cluster{servers: servers}
	fail := func(err error) (*cluster, error) {
		c.close() // whatever was started so far
		return nil, err
	}
	addrs = servers.Addrs()
	for _, addr := range addrs {
		// ClientOptions sets ContextTimeoutEnabled, which goredis.New
		// requires, and turns off go-redis's own retries.
		client := redis.NewClient(goredis.ClientOptions(addr))
		c.clients = append(c.clients, client)
		node, err := goredis.New(client)
		if err != nil {
			return fail(err)
		}
		c.nodes = append(c.nodes, node)
	}
	// Fail early, and plainly, on a mistyped address or a server that wants
	// a password, rather than with a lock error later.
	for i, client := range c.clients {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := client.Ping(pctx).Err()
		cancel()
		if err != nil {
			return fail(fmt.Errorf("no answer to PING from the Redis server at %s: %w", addrs[i], err))
		}
	}
	return c, nil
}

// down takes node i down and returns its address.
func (c *cluster) down(i int) string {
	if c.servers.Embedded() {
		c.servers.Stop(i) // the server stops: connections are refused
	} else {
		_ = c.clients[i].Close() // we cannot stop your server: cut our own link
	}
	return c.servers.Addrs()[i]
}

// how says how the nodes at addrs were taken down, for a section header.
func (c *cluster) how(addrs []string) string {
	list := strings.Join(addrs, ", ")
	switch {
	case c.servers.Embedded():
		return " (stopped " + list + ")"
	case len(addrs) == 1:
		return " (closed our connection to " + list + "; the server keeps running)"
	default:
		return " (closed our connections to " + list + "; the servers keep running)"
	}
}

// close closes every client, then every embedded server. Closing twice is
// harmless.
func (c *cluster) close() {
	for _, client := range c.clients {
		_ = client.Close()
	}
	c.servers.Close()
}
