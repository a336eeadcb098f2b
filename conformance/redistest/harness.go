package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/core"
)

// NodeFactory makes a node of the backend under test for the server at
// addr, and returns a function that closes what it made (its client).
type NodeFactory func(addr string) (node core.Node, closeClient func() error, err error)

// ClusterFactory makes a node of the backend under test for the Redis
// Cluster whose masters are at addrs, and returns a function that closes
// what it made.
type ClusterFactory func(addrs []string) (node core.Node, closeClient func() error, err error)

// ClusterMasters is the number of masters of each cluster a ClusterHarness
// starts.
const ClusterMasters = 3

// RequireServer fails the test when no redis-server binary is available
// and CI is set, and skips it otherwise: a missing server must never pass
// as a green CI run.
func RequireServer(t testing.TB) {
	t.Helper()
	_, err := Binary()
	RequireTool(t, err)
}

// RequireTool skips t when err, the lookup of a tool the test needs, is
// not nil, or fails it when the CI environment variable is set: under CI a
// missing tool is a broken install, not a reason to test less.
func RequireTool(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%v (CI is set, so this is a failure, not a skip)", err)
	}
	t.Skip(err)
}

// Harness returns a conformance.HarnessMaker that runs the suite against
// real redis-server processes on free loopback ports, reached through the
// nodes that factory makes.
func Harness(factory NodeFactory) conformance.HarnessMaker {
	return MixedHarness(factory)
}

// MixedHarness is Harness with nodes of several drivers in one Locker:
// the node of server i is made by factories[i%len(factories)], so a Locker
// over three servers has one node of each of three drivers.
func MixedHarness(factories ...NodeFactory) conformance.HarnessMaker {
	return func(t *testing.T) conformance.Harness {
		RequireServer(t)
		if len(factories) == 0 {
			t.Fatal("redistest: MixedHarness needs at least one factory")
		}
		return &harness{
			start: startSingle,
			node: func(i int, tg target) (core.Node, func() error, error) {
				return singleNode(factories[i%len(factories)])(i, tg)
			},
			pool: newPool(startSingle),
		}
	}
}

// ClusterHarness returns a conformance.HarnessMaker whose every server is
// a real Redis Cluster of ClusterMasters masters on loopback, reached
// through the nodes that factory makes. Its servers implement
// conformance.ClusterServers, so Run adds the Cluster group.
func ClusterHarness(factory ClusterFactory) conformance.HarnessMaker {
	return func(t *testing.T) conformance.Harness {
		RequireServer(t)
		return &harness{
			start:   startClusterTarget,
			node:    clusterNode(factory),
			cluster: true,
			pool:    newPool(startClusterTarget),
		}
	}
}

// Driver returns the driver named name, reaching the single servers of a
// Harness or MixedHarness through the nodes that factory makes, for
// conformance.RunCrossDriver.
func Driver(name string, factory NodeFactory) conformance.Driver {
	return conformance.Driver{Name: name, Nodes: func(t *testing.T, s conformance.Servers) []core.Node {
		return nodesOf(t, s, singleNode(factory))
	}}
}

// ClusterDriver is Driver for the clusters of a ClusterHarness.
func ClusterDriver(name string, factory ClusterFactory) conformance.Driver {
	return conformance.Driver{Name: name, Nodes: func(t *testing.T, s conformance.Servers) []core.Node {
		return nodesOf(t, s, clusterNode(factory))
	}}
}

// nodeFunc makes the node of server i, whose target is tg.
type nodeFunc func(i int, tg target) (core.Node, func() error, error)

// singleNode adapts a NodeFactory to the targets of single servers.
func singleNode(f NodeFactory) nodeFunc {
	return func(_ int, tg target) (core.Node, func() error, error) { return f(tg.addrs()[0]) }
}

// clusterNode adapts a ClusterFactory to the targets of clusters.
func clusterNode(f ClusterFactory) nodeFunc {
	return func(_ int, tg target) (core.Node, func() error, error) { return f(tg.addrs()) }
}

// nodesOf makes one node per server of s with build, closing each when
// the test ends.
func nodesOf(t *testing.T, s conformance.Servers, build nodeFunc) []core.Node {
	t.Helper()
	nodes := make([]core.Node, s.Len())
	for i := range nodes {
		n, closeClient, err := build(i, targetOf(t, s, i))
		require.NoError(t, err)
		t.Cleanup(func() { _ = closeClient() })
		nodes[i] = n
	}
	return nodes
}

// target is what stands behind one node: a single server or a cluster.
type target interface {
	addrs() []string
	control() redis.UniversalClient
	flushScripts(ctx context.Context) error
	stop() error
	stopKeepingData(ctx context.Context) error
	start(ctx context.Context) error
	pause() error
	resume() error
	// reset makes the target what a new one is, once the test that used
	// it has ended and closed its clients.
	reset(ctx context.Context) error
	close() error
}

type harness struct {
	start   func(ctx context.Context) (target, error)
	node    nodeFunc
	cluster bool
	pool    *pool // the isolated targets, reused test after test

	mu     sync.Mutex
	shared []target // started on first use, stopped by Close
}

func (h *harness) Shared(t *testing.T, n int) conformance.Servers {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if missing := n - len(h.shared); missing > 0 {
		list, err := startAll(t.Context(), h.start, missing)
		h.shared = append(h.shared, list...)
		require.NoError(t, err)
	}
	return h.servers(h.shared[:n], true)
}

// Isolated takes n targets from the harness's pool, which starts those it
// lacks, and gives them back when t ends, to be reset for the next test:
// a reused target is indistinguishable from a new one to the suite.
func (h *harness) Isolated(t *testing.T, n int) conformance.Servers {
	t.Helper()
	list, err := h.pool.take(t.Context(), n)
	t.Cleanup(func() { h.pool.give(list) })
	require.NoError(t, err)
	return h.servers(list, false)
}

func (h *harness) servers(list []target, shared bool) conformance.Servers {
	s := &servers{h: h, list: list, shared: shared}
	if h.cluster {
		return &clusterServers{s}
	}
	return s
}

func (h *harness) ClosedNode(t *testing.T) core.Node {
	s := h.Shared(t, 1)
	node, closeClient, err := h.node(0, targetOf(t, s, 0))
	require.NoError(t, err)
	require.NoError(t, closeClient())
	return node
}

func (h *harness) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, tg := range h.shared {
		errs = append(errs, tg.close())
	}
	h.shared = nil
	return errors.Join(append(errs, h.pool.close())...)
}

// targetOf returns what stands behind server i of s, which must come from
// a harness of this package.
func targetOf(t *testing.T, s conformance.Servers, i int) target {
	t.Helper()
	switch s := s.(type) {
	case *servers:
		return s.list[i]
	case *clusterServers:
		return s.list[i]
	}
	t.Fatalf("redistest: servers of type %T do not come from a redistest harness", s)
	return nil
}

type servers struct {
	h      *harness
	list   []target
	shared bool
}

func (s *servers) Len() int { return len(s.list) }

func (s *servers) Nodes(t *testing.T) []core.Node {
	t.Helper()
	return nodesOf(t, s, s.h.node)
}

func (s *servers) Get(ctx context.Context, i int, key string) (string, time.Duration, bool, error) {
	c := s.list[i].control()
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		pttl = p.PTTL(ctx, key)
		return nil
	})
	switch {
	case errors.Is(get.Err(), redis.Nil):
		return "", 0, false, nil
	case err != nil:
		return "", 0, false, fmt.Errorf("redistest: GET on %v: %w", s.list[i].addrs(), err)
	}
	ttl := pttl.Val()
	if ttl < 0 {
		ttl = 0 // -1: no expiry
	}
	return get.Val(), ttl, true, nil
}

func (s *servers) Set(ctx context.Context, i int, key, value string, ttl time.Duration) error {
	args := []any{"set", key, value}
	if ttl > 0 {
		args = append(args, "px", ttl.Milliseconds())
	}
	if err := s.list[i].control().Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("redistest: SET on %v: %w", s.list[i].addrs(), err)
	}
	return nil
}

func (s *servers) Del(ctx context.Context, i int, key string) error {
	if err := s.list[i].control().Del(ctx, key).Err(); err != nil {
		return fmt.Errorf("redistest: DEL on %v: %w", s.list[i].addrs(), err)
	}
	return nil
}

func (s *servers) FlushScripts(ctx context.Context, i int) error {
	if s.shared {
		return conformance.ErrShared
	}
	return s.list[i].flushScripts(ctx)
}

func (s *servers) fault(i int, f func(target) error) error {
	if s.shared {
		return conformance.ErrShared
	}
	return f(s.list[i])
}

func (s *servers) Stop(i int) error { return s.fault(i, target.stop) }

func (s *servers) StopKeepingData(i int) error {
	return s.fault(i, func(tg target) error { return tg.stopKeepingData(context.Background()) })
}

func (s *servers) Start(i int) error {
	return s.fault(i, func(tg target) error { return tg.start(context.Background()) })
}

func (s *servers) Pause(i int) error  { return s.fault(i, target.pause) }
func (s *servers) Resume(i int) error { return s.fault(i, target.resume) }

// single is one redis-server with a control client that bypasses the
// backend under test.
type single struct {
	*Server
	ctl    *redis.Client
	config string // the server's configuration when new (fingerprint)
}

func startSingle(ctx context.Context) (target, error) {
	s, err := StartServer(ctx)
	if err != nil {
		return nil, err
	}
	config, err := configOf(ctx, s.Addr())
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return &single{Server: s, ctl: plainClient(s.Addr()), config: config}, nil
}

func (s *single) addrs() []string                { return []string{s.Addr()} }
func (s *single) control() redis.UniversalClient { return s.ctl }
func (s *single) flushScripts(ctx context.Context) error {
	return s.ctl.ScriptFlush(ctx).Err()
}
func (s *single) stop() error { return s.Stop() }
func (s *single) stopKeepingData(ctx context.Context) error {
	return s.StopKeepingData(ctx)
}
func (s *single) start(ctx context.Context) error { return s.Restart(ctx) }
func (s *single) pause() error                    { return s.Pause() }
func (s *single) resume() error                   { return s.Resume() }
func (s *single) close() error {
	err := s.ctl.Close()
	if errors.Is(err, redis.ErrClosed) {
		err = nil
	}
	return errors.Join(err, s.Close())
}

// reset renews the server (adopted, as StartServer leaves it) and gives
// it a new control client.
func (s *single) reset(ctx context.Context) error {
	_ = s.ctl.Close()
	if err := renew(ctx, s.Server, s.config, true); err != nil {
		return err
	}
	s.ctl = plainClient(s.Addr())
	return nil
}

// clusterTarget is one Redis Cluster behind one node.
type clusterTarget struct {
	*Cluster
	configs []string // each master's configuration when new (fingerprint)
}

func startClusterTarget(ctx context.Context) (target, error) {
	c, err := StartCluster(ctx, ClusterMasters)
	if err != nil {
		return nil, err
	}
	tg := &clusterTarget{Cluster: c}
	for _, m := range c.Masters() {
		config, err := configOf(ctx, m.Addr())
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		tg.configs = append(tg.configs, config)
	}
	return tg, nil
}

func (c *clusterTarget) addrs() []string                { return c.Addrs() }
func (c *clusterTarget) control() redis.UniversalClient { return c.Control() }
func (c *clusterTarget) flushScripts(ctx context.Context) error {
	return c.each(func(s *Server) error {
		cl := plainClient(s.Addr())
		defer cl.Close()
		return cl.ScriptFlush(ctx).Err()
	})
}
func (c *clusterTarget) stop() error { return c.Stop() }

// errClusterKeep is StopKeepingData's answer for a cluster.
var errClusterKeep = fmt.Errorf("redistest: StopKeepingData is not supported for clusters: %w", errors.ErrUnsupported)

func (c *clusterTarget) stopKeepingData(context.Context) error { return errClusterKeep }
func (c *clusterTarget) start(ctx context.Context) error       { return c.Restart(ctx) }
func (c *clusterTarget) pause() error                          { return c.Pause() }
func (c *clusterTarget) resume() error                         { return c.Resume() }
func (c *clusterTarget) close() error                          { return c.Close() }

// reset revives every master (a killed one comes back with its place in
// the cluster, from its nodes.conf), waits until the cluster is healthy
// and no master flags another as failing, with a new control client, and
// scrubs every master.
func (c *clusterTarget) reset(ctx context.Context) error {
	masters := c.Masters()
	if err := c.each(func(s *Server) error {
		return revive(ctx, s, c.configs[slices.Index(masters, s)])
	}); err != nil {
		return err
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return err
	}
	if err := c.each(func(s *Server) error { return scrub(ctx, s.Addr(), false) }); err != nil {
		return err
	}
	// Last: scrub kills every client's connections, a control client's too.
	c.renewControl()
	c.Cluster.control.ReloadState(ctx) // learn the slot map now
	return nil
}

// clusterServers are servers that are each a Redis Cluster.
type clusterServers struct{ *servers }

var _ conformance.ClusterServers = (*clusterServers)(nil)

func (s *clusterServers) cluster(i int) *Cluster { return s.list[i].(*clusterTarget).Cluster }

func (s *clusterServers) Masters() int { return ClusterMasters }

func (s *clusterServers) KeySlot(ctx context.Context, i int, key string) (int, error) {
	slot, err := s.cluster(i).Control().ClusterKeySlot(ctx, key).Result()
	return int(slot), err
}

// MasterOf asks the cluster for key's slot and maps it to the master that
// StartCluster gave it (slots never move; TestCluster checks the mapping
// against where keys land).
func (s *clusterServers) MasterOf(ctx context.Context, i int, key string) (int, error) {
	slot, err := s.KeySlot(ctx, i, key)
	if err != nil {
		return 0, err
	}
	return s.cluster(i).MasterOfSlot(slot), nil
}

func (s *clusterServers) KillMaster(i, m int) error {
	if s.shared {
		return conformance.ErrShared
	}
	return s.cluster(i).Masters()[m].Kill()
}

// QuietRedisLogs drops the log lines of go-redis (the harness's own
// driver) for the rest of the process: dial failures of servers that tests
// stop on purpose. Test failures still say what went wrong. Call it from
// TestMain.
func QuietRedisLogs() { redis.SetLogger(quiet{}) }

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Main is a TestMain for packages that test against real servers: it
// quiets go-redis's logs (QuietRedisLogs), runs the tests, stops the
// servers of SharedServers and TestServers (CloseServers), and then fails
// the run if goroutines started by the tests are still running after a
// grace of three seconds for drivers' background work (goleak).
func Main(m *testing.M) {
	QuietRedisLogs()
	code := m.Run()
	if err := CloseServers(); err != nil {
		fmt.Fprintf(os.Stderr, "redistest: stopping the servers: %v\n", err)
		code = 1
	}
	if code == 0 {
		if err := conformance.FindLeaks(conformance.LeakGrace); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
