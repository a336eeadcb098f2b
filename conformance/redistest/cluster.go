package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/core/driver"
)

// clusterTimeout bounds how long a cluster may take to agree on its slots
// after it is formed or restarted.
const clusterTimeout = 30 * time.Second

// clusterArgs are the redis-server arguments of a cluster master. Without
// replicas, a master that dies leaves its slots unserved; with full
// coverage not required, the other masters keep serving theirs, which is
// what a lock over several independent clusters counts on.
var clusterArgs = []string{
	"--cluster-enabled", "yes",
	"--cluster-config-file", "nodes.conf",
	"--cluster-node-timeout", "3000",
	"--cluster-require-full-coverage", "no",
}

// Cluster is a Redis Cluster of masters (no replicas) on loopback ports,
// owned by the code that started it. Slots are split evenly in master
// order and never move. Its methods are safe for concurrent use.
type Cluster struct {
	masters []*Server
	control *redis.ClusterClient
}

// StartCluster starts masters redis-server processes in cluster mode,
// assigns them the 16384 slots evenly, joins them and waits until every
// master sees every slot served. opts apply to each master.
func StartCluster(ctx context.Context, masters int, opts ...Option) (*Cluster, error) {
	if masters < 1 {
		return nil, fmt.Errorf("redistest: a cluster needs at least one master, not %d", masters)
	}
	c := &Cluster{masters: make([]*Server, masters)}
	errs := make([]error, masters)
	var wg sync.WaitGroup
	for m := range masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.masters[m], errs[m] = startClusterServer(ctx, opts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.closeServers()
		return nil, err
	}
	c.control = newControl(c.Addrs())
	if err := c.form(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// newControl returns the cluster client of the test's own reads and
// writes.
func newControl(addrs []string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 addrs,
		ContextTimeoutEnabled: true,
		MaxRedirects:          3,
		MaxRetries:            -1,
		DialerRetries:         1,
		PoolSize:              16,
	})
}

// renewControl replaces the control client with a new one; no test may
// be using the old one.
func (c *Cluster) renewControl() {
	_ = c.control.Close()
	c.control = newControl(c.Addrs())
}

// startClusterServer starts one master on a port whose cluster bus port
// (port+10000) is free too.
func startClusterServer(ctx context.Context, opts []Option) (*Server, error) {
	opts = append([]Option{WithArgs(clusterArgs...)}, opts...)
	var err error
	for range 10 {
		var port int
		if port, err = freeClusterPort(); err != nil {
			continue
		}
		var s *Server
		if s, err = StartServer(ctx, append(opts, WithPort(port))...); err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func freeClusterPort() (int, error) {
	for range 20 {
		port, err := FreePort()
		if err != nil {
			return 0, err
		}
		if port+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("redistest: no free port with a free cluster bus port")
}

// form gives each master its slots and a distinct config epoch, introduces
// them to each other and waits for agreement.
func (c *Cluster) form(ctx context.Context) error {
	for m, s := range c.masters {
		cl := plainClient(s.Addr())
		args := []any{"cluster", "addslots"}
		for slot := c.firstSlot(m); slot < c.firstSlot(m+1); slot++ {
			args = append(args, slot)
		}
		err := cl.Do(ctx, args...).Err()
		if err == nil {
			err = cl.Do(ctx, "cluster", "set-config-epoch", m+1).Err()
		}
		if err == nil && m > 0 {
			err = cl.Do(ctx, "cluster", "meet", "127.0.0.1", c.masters[0].Port()).Err()
		}
		cl.Close()
		if err != nil {
			return fmt.Errorf("redistest: forming the cluster at %s: %w", s.Addr(), err)
		}
	}
	return c.WaitHealthy(ctx)
}

// firstSlot is the first slot of master m's even share; firstSlot(len) is
// SlotCount.
func (c *Cluster) firstSlot(m int) int { return m * driver.SlotCount / len(c.masters) }

// plainClient returns a client to one server, bypassing cluster routing.
func plainClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
}

// WaitHealthy waits until every running master reports the cluster state
// ok, knows every master, sees all the slots of running masters assigned,
// and has its links to the others connected and none of them flagged as
// failing (a master killed and started again stays flagged by the others
// for up to twice the node timeout); it fails after 30 s or when ctx ends.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	clients := make([]*redis.Client, len(c.masters))
	for m, s := range c.masters {
		clients[m] = plainClient(s.Addr())
		defer clients[m].Close()
	}
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		last := c.unhealthy(ctx, clients)
		if last == nil {
			c.control.ReloadState(ctx) // learn the slot map now
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster not healthy after %v: %w", clusterTimeout, last)
		case <-time.After(delay):
		}
	}
}

// unhealthy returns what the first running master reports amiss, or nil.
func (c *Cluster) unhealthy(ctx context.Context, clients []*redis.Client) error {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_known_nodes":    strconv.Itoa(len(c.masters)),
		"cluster_slots_assigned": strconv.Itoa(driver.SlotCount),
	}
	for m, s := range c.masters {
		if !s.Running() {
			continue
		}
		text, err := clients[m].ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("redistest: CLUSTER INFO on %s: %w", s.Addr(), err)
		}
		info := make(map[string]string)
		for line := range strings.Lines(text) {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				info[k] = v
			}
		}
		for k, v := range want {
			if info[k] != v {
				return fmt.Errorf("redistest: cluster master %s reports %s:%s, want %s", s.Addr(), k, info[k], v)
			}
		}
		if err := linksOK(ctx, clients[m]); err != nil {
			return fmt.Errorf("redistest: cluster master %s: %w", s.Addr(), err)
		}
	}
	return nil
}

// linksOK returns what CLUSTER NODES on one master shows amiss: a node
// flagged failing (fail, fail?), not yet known (handshake, noaddr), or a
// link that is not connected.
func linksOK(ctx context.Context, c *redis.Client) error {
	text, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLUSTER NODES: %w", err)
	}
	for line := range strings.Lines(text) {
		// id addr flags master ping-sent pong-recv epoch link-state slots...
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		for flag := range strings.SplitSeq(f[2], ",") {
			switch flag {
			case "fail", "fail?", "handshake", "noaddr":
				return fmt.Errorf("node %s is flagged %s", f[1], flag)
			}
		}
		if f[7] != "connected" {
			return fmt.Errorf("node %s's link is %s", f[1], f[7])
		}
	}
	return nil
}

// Addrs returns the masters' addresses, in master order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.masters))
	for m, s := range c.masters {
		out[m] = s.Addr()
	}
	return out
}

// Masters returns the masters, in order. Faults injected on them directly
// are the caller's to undo.
func (c *Cluster) Masters() []*Server { return c.masters }

// Control returns a cluster client for the test's own reads and writes,
// bypassing the backend under test. The cluster owns it.
func (c *Cluster) Control() *redis.ClusterClient { return c.control }

// MasterOfSlot returns the index of the master that was given slot.
func (c *Cluster) MasterOfSlot(slot int) int {
	for m := range c.masters {
		if slot < c.firstSlot(m+1) {
			return m
		}
	}
	return len(c.masters) - 1
}

// Stop shuts every master down; their keys are lost.
func (c *Cluster) Stop() error { return c.each((*Server).Stop) }

// Restart starts every master again, empty but with its place in the
// cluster (the cluster configuration survives), and waits until the cluster
// is healthy.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.each(func(s *Server) error { return s.Restart(ctx) }); err != nil {
		return err
	}
	return c.WaitHealthy(ctx)
}

// Pause pauses every master (SIGSTOP).
func (c *Cluster) Pause() error { return c.each((*Server).Pause) }

// Resume resumes every master.
func (c *Cluster) Resume() error { return c.each((*Server).Resume) }

// Close closes the control client and kills every master. It is
// idempotent.
func (c *Cluster) Close() error {
	err := c.control.Close()
	if errors.Is(err, redis.ErrClosed) {
		err = nil
	}
	return errors.Join(err, c.closeServers())
}

func (c *Cluster) closeServers() error {
	return c.each(func(s *Server) error {
		if s == nil {
			return nil
		}
		return s.Close()
	})
}

func (c *Cluster) each(f func(*Server) error) error {
	errs := make([]error, len(c.masters))
	var wg sync.WaitGroup
	for m, s := range c.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[m] = f(s)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
