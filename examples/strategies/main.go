// Strategies compares the three quorum strategies of package strategies
// (sequential, parallel, failfast) on five nodes, one of them slow:
//
//	go run ./examples/strategies
//
// It starts five in-process Redis servers (miniredis, reached over real
// TCP through rueidis, whose calls return as soon as their context is
// cancelled; measured here, go-redis waits for the reply of a call whose
// context was cancelled without a deadline, so through go-redis a round
// that stops at quorum still lasted the slow node's 30 ms). miniredis cannot be made slow, so node 0 is reached
// through a small TCP proxy, written below, that holds each chunk the
// client sends for 30 ms before passing it on: every command to node 0
// costs 30 ms more. One Locker per strategy takes and releases a free key
// a few times, and the program prints the median acquisition latency of
// each, twice:
//
//   - greedy (the default): every strategy asks every node and waits for
//     every answer, so each pays for the slow node. Sequential pays the sum
//     of the nodes' round trips, parallel and failfast only the slowest.
//     With one slow node and four fast loopback ones the two are close;
//     over a real network, N round trips against one is the difference.
//   - WithStopAtQuorum(true): a round ends at the third vote. Parallel and
//     failfast get their three votes from the fast nodes and never wait for
//     node 0; sequential asks the nodes in index order, so it meets node 0
//     first.
//
// Failfast differs from parallel only when a quorum becomes impossible
// (other holders, nodes down): it ends the round at the third refusal
// instead of waiting for the slow node.
//
// The program checks, with generous margins, that neither parallel nor
// failfast is slower than sequential, and that with WithStopAtQuorum they
// avoid the slow node. To run it against your own independent Redis masters
// (then no node is slowed, and the differences are your network's):
//
//	REDIS_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 go run ./examples/strategies
//
// It exits 0 when everything behaved as expected, and 1 otherwise.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/examples/internal/demo"
	"github.com/quorumlock/quorumlock/strategies"
)

const (
	delay   = 30 * time.Millisecond // added to every command to node 0 (embedded mode)
	samples = 5                     // acquisitions per strategy and mode; the median is printed
	// margin is how much slower than sequential parallel or failfast may
	// measure before the program calls it a failure: timings on a busy
	// machine (or under the race detector) wobble by milliseconds.
	margin = 10 * time.Millisecond
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := run(ctx, os.Stdout, demo.ParseAddrs(os.Getenv("REDIS_ADDRS"))); err != nil {
		fmt.Fprintln(os.Stderr, "strategies: FAILED:", err)
		os.Exit(1)
	}
}

// run is the whole demonstration. With no addrs it starts five embedded
// servers, node 0 behind the slow proxy; otherwise it uses the Redis
// masters at addrs, none slowed.
func run(ctx context.Context, out io.Writer, addrs []string) error {
	c, err := newCluster(ctx, addrs)
	if err != nil {
		return err
	}
	defer c.close()

	// A key of this run's own, in case your servers hold an older one.
	key := fmt.Sprintf("strategies:%d:report", time.Now().UnixNano())
	fmt.Fprintf(out, "quorumlock strategies: %s\n", c.where())
	fmt.Fprintf(out, "median of %d acquisitions (TryAcquire) of a free key per strategy, each released before the next\n", samples)

	// 1. Greedy: every node is asked and waited for.
	if err := compareGreedy(ctx, out, c, key); err != nil {
		return err
	}

	// 2. WithStopAtQuorum(true): the round ends at the quorum-th vote.
	if err := compareAtQuorum(ctx, out, c, key); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nfailfast differs from parallel only when a quorum becomes impossible (the key held")
	fmt.Fprintln(out, "elsewhere, nodes down): it ends such a round at once instead of awaiting the rest.")

	fmt.Fprintln(out, "\nstrategies: all checks passed")
	return nil
}

// compareGreedy measures the strategies with their defaults, where every
// node is asked and every answer awaited, and explains the figures.
func compareGreedy(ctx context.Context, out io.Writer, c *cluster, key string) error {
	fmt.Fprintln(out, "\ngreedy (the default: every node is asked, every answer awaited):")
	greedy, err := measure(ctx, out, c, key, nil)
	if err != nil {
		return err
	}
	if err := notSlowerThanSequential(greedy); err != nil {
		return err
	}
	fmt.Fprintln(out, "  sequential pays every node's round trip in turn, parallel and failfast only the")
	fmt.Fprintln(out, "  slowest one's: the slow node costs all three its delay, and the fast ones are")
	fmt.Fprintln(out, "  too quick here for their sum to show much.")
	return nil
}

// compareAtQuorum measures the strategies with WithStopAtQuorum(true),
// checks that parallel and failfast did not wait for the slow node, and
// explains the figures.
func compareAtQuorum(ctx context.Context, out io.Writer, c *cluster, key string) error {
	fmt.Fprintln(out, "\nWithStopAtQuorum(true) (a round ends at the third vote):")
	atQuorum, err := measure(ctx, out, c, key, []strategies.Option{strategies.WithStopAtQuorum(true)})
	if err != nil {
		return err
	}
	if err := notSlowerThanSequential(atQuorum); err != nil {
		return err
	}
	if c.slow == nil {
		fmt.Fprintln(out, "  no node is slowed on REDIS_ADDRS: sequential pays three round trips in turn,")
		fmt.Fprintln(out, "  parallel and failfast the slowest of the first three answers.")
		return nil
	}
	// Parallel and failfast must not have waited for the slow node.
	for _, name := range []string{"parallel", "failfast"} {
		if atQuorum[name] >= delay {
			return fmt.Errorf("with WithStopAtQuorum, %s took %v: it waited for the slow node (%v)", name, atQuorum[name], delay)
		}
	}
	fmt.Fprintln(out, "  parallel and failfast take the votes of three fast nodes and stop; sequential")
	fmt.Fprintln(out, "  asks node 0 first, in index order, and waits for it.")
	return nil
}

// notSlowerThanSequential checks the medians m, by strategy name: neither
// parallel nor failfast may be slower than sequential by more than margin.
func notSlowerThanSequential(m map[string]time.Duration) error {
	seq := m["sequential"]
	for _, name := range []string{"parallel", "failfast"} {
		if m[name] > seq+margin {
			return fmt.Errorf("%s took %v, sequential %v: it should not be slower", name, m[name], seq)
		}
	}
	return nil
}

// measure takes and releases key samples times with one Locker per
// strategy, the strategies taking turns so that a hiccup of the machine
// does not fall on one of them only; it prints and returns each median.
func measure(ctx context.Context, out io.Writer, c *cluster, key string, opts []strategies.Option) (map[string]time.Duration, error) {
	lockers := []struct {
		name     string
		strategy func(...strategies.Option) strategies.Strategy
		locker   *core.Locker
		took     []time.Duration
	}{
		{name: "sequential", strategy: strategies.Sequential},
		{name: "parallel", strategy: strategies.Parallel},
		{name: "failfast", strategy: strategies.FailFast},
	}
	defer func() {
		for _, l := range lockers {
			if l.locker != nil {
				_ = l.locker.Close()
			}
		}
	}()
	for i := range lockers {
		nodes, err := c.newNodes()
		if err != nil {
			return nil, err
		}
		l, err := core.New(nodes,
			core.WithStrategy(lockers[i].strategy(opts...)),
			core.WithNodeTimeout(300*time.Millisecond), // well above the slow node's delay
		)
		if err != nil {
			return nil, err
		}
		lockers[i].locker = l
	}
	for range samples {
		for i := range lockers {
			l := &lockers[i]
			start := time.Now()
			lock, err := l.locker.TryAcquire(ctx, key)
			took := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.locker, err)
			}
			if err := lock.Release(ctx); err != nil {
				return nil, fmt.Errorf("%s: release: %w", l.locker, err)
			}
			l.took = append(l.took, took)
		}
	}
	medians := map[string]time.Duration{}
	for _, l := range lockers {
		slices.Sort(l.took)
		m := l.took[len(l.took)/2]
		medians[l.name] = m
		fmt.Fprintf(out, "  %-28s %8v\n", strategyName(l.name, opts), m.Round(10*time.Microsecond))
	}
	return medians, nil
}

func strategyName(name string, opts []strategies.Option) string {
	if len(opts) > 0 {
		return name + "+WithStopAtQuorum"
	}
	return name
}

// cluster is the set of Redis nodes, node 0 possibly behind the slow proxy.
type cluster struct {
	servers *demo.Servers    // embedded, or those of REDIS_ADDRS
	slow    *slowProxy       // in front of node 0, embedded mode only
	clients []rueidis.Client // one per node, node 0's through the proxy
}

// newCluster starts the embedded servers and the proxy (when addrs is
// empty), makes one rueidis client per server, and checks that each
// answers.
func newCluster(ctx context.Context, addrs []string) (*cluster, error) {
	servers, err := demo.Start(addrs, 5)
	if err != nil {
		return nil, err
	}
	addrs = servers.Addrs()
	c := &cluster{servers: servers}
	fail := func(err error) (*cluster, error) {
		c.close()
		return nil, err
	}
	if servers.Embedded() {
		p, err := newSlowProxy(addrs[0], delay)
		if err != nil {
			return fail(err)
		}
		c.slow = p
	}
	for i, addr := range addrs {
		dial := addr
		if i == 0 && c.slow != nil {
			dial = c.slow.addr()
		}
		o := qlrueidis.ClientOption(dial)
		o.ForceSingleClient = true // an independent master: no cluster detection
		client, err := rueidis.NewClient(o)
		if err != nil {
			if client != nil {
				client.Close()
			}
			return fail(fmt.Errorf("no connection to the Redis server at %s: %w", addr, err))
		}
		c.clients = append(c.clients, client)
	}
	for i, client := range c.clients {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := client.Do(pctx, client.B().Ping().Build()).Error()
		cancel()
		if err != nil {
			return fail(fmt.Errorf("no answer to PING from the Redis server at %s: %w", addrs[i], err))
		}
	}
	return c, nil
}

// newNodes returns one node per client, for one Locker: a Locker closes
// its nodes, and a rueidis node (without WithCloseClient(true)) leaves its client
// open for the next.
func (c *cluster) newNodes() ([]core.Node, error) {
	var nodes []core.Node
	for i, client := range c.clients {
		node, err := qlrueidis.New(client, qlrueidis.WithName(c.servers.Addrs()[i]))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

// where says which servers the demo runs on, for the header.
func (c *cluster) where() string {
	addrs := c.servers.Addrs()
	if c.servers.Embedded() {
		return fmt.Sprintf("%s, quorum %d;\nnode 0 (%s) is reached through a proxy that delays every request by %v",
			c.servers.Where(), len(addrs)/2+1, addrs[0], delay)
	}
	return fmt.Sprintf("%s, quorum %d; no node is slowed", c.servers.Where(), len(addrs)/2+1)
}

// close closes every client, the proxy, then every embedded server.
func (c *cluster) close() {
	for _, client := range c.clients {
		client.Close()
	}
	if c.slow != nil {
		c.slow.close()
	}
	c.servers.Close()
}

// slowProxy is a loopback TCP proxy to one server that holds every chunk
// the client sends for a fixed delay before forwarding it; replies pass
// straight through. Its goroutines end when close returns.
type slowProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open connections, both sides
	closed bool
	wg     sync.WaitGroup
}

func newSlowProxy(target string, delay time.Duration) (*slowProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &slowProxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *slowProxy) addr() string { return p.ln.Addr().String() }

// accept serves each client connection with a connection of its own to the
// target, until the listener is closed.
func (p *slowProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Go(func() {
			p.pipe(server, client, p.delay) // requests, delayed
		})
		p.wg.Go(func() {
			p.pipe(client, server, 0) // replies
		})
	}
}

// track registers a connection pair, or closes it if the proxy is closing.
func (p *slowProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies from src to dst, sleeping d before forwarding each chunk it
// reads, and closes both when either side ends.
func (p *slowProxy) pipe(dst, src net.Conn, d time.Duration) {
	defer func() {
		dst.Close()
		src.Close()
	}()
	if d == 0 {
		_, _ = io.Copy(dst, src)
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			time.Sleep(d) // the simulated network latency, bounded
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops accepting, closes every connection and waits for the
// proxy's goroutines (at most one delay for a chunk in flight).
func (p *slowProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
