package rueidis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// DialOption configures Dial. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil DialOption is skipped.
// Its String shows the option as written (credentials and functions
// elided).
type DialOption interface {
	applyDial(*dialConfig)
	String() string
}

type dialConfig struct {
	username, password string
	tls                bool
	tlsConfig          *tls.Config
	cluster            bool
	clientOptions      []func(*rueidis.ClientOption)
	wait               time.Duration
	errs               []error
}

type dialOption struct {
	fn   func(*dialConfig)
	name string
}

func (o dialOption) applyDial(c *dialConfig) { o.fn(c) }
func (o dialOption) String() string          { return o.name }

// WithCredentials authenticates every client Dial makes: as the Redis ACL
// user username with password, or, with an empty username, with password
// alone (requirepass, the "default" user). Two empty strings mean no
// authentication. Every value is valid for the options (rueidis.NewClient
// fails a wrong one, as Dial describes).
// Default: no authentication.
func WithCredentials(username, password string) DialOption {
	return dialOption{func(c *dialConfig) { c.username, c.password = username, password }, "WithCredentials(...)"}
}

// WithTLS, on, makes every client Dial makes connect with TLS, using a
// clone of the WithTLSConfig configuration for each client, or, without
// one, TLS 1.2 or later with the server name taken from the host of each
// address (of the first seed for a cluster). Off, clients use plain TCP.
// Default: off.
func WithTLS(on bool) DialOption {
	return dialOption{func(c *dialConfig) { c.tls = on }, "WithTLS(" + strconv.FormatBool(on) + ")"}
}

// WithTLSConfig sets the TLS configuration of every client Dial makes (a
// clone for each), and turns TLS on, as WithTLS(true) does. A nil cfg
// changes nothing. Every value is valid.
// Default: none; with WithTLS(true), TLS 1.2 or later with the server name
// taken from the host of each address.
func WithTLSConfig(cfg *tls.Config) DialOption {
	if cfg == nil {
		return dialOption{func(*dialConfig) {}, "WithTLSConfig(nil)"}
	}
	return dialOption{func(c *dialConfig) { c.tls, c.tlsConfig = true, cfg }, "WithTLSConfig(...)"}
}

// WithCluster, on, makes the addresses the seeds of ONE Redis Cluster (any
// of its masters), which Dial makes one node of, over a cluster client: a
// cluster's masters are not independent voters. Off, every address is an
// independent master and a node of its own.
// Default: off.
// With it, Dial returns an error matching core.ErrInvalidArgument when the
// servers are not a cluster.
func WithCluster(on bool) DialOption {
	return dialOption{func(c *dialConfig) { c.cluster = on }, "WithCluster(" + strconv.FormatBool(on) + ")"}
}

// WithClientOption calls fn on the options of each client, once per
// address (once for a cluster), after Dial has set them from ClientOption,
// WithCredentials and WithTLS, and before rueidis.NewClient: for timeouts
// (Dialer.Timeout, the dial timeout, stays rueidis's to set), a client
// name, a database, a DialCtxFn. Each WithClientOption adds its fn,
// called in order. A nil fn changes nothing.
// Default: ClientOption's settings.
// Dial returns an error matching core.ErrInvalidArgument when fn changes
// InitAddress, ForceSingleClient, AlwaysPipelining, DisableAutoPipelining
// or PipelineMultiplex from what Dial set, or sets Sentinel, replica or
// redirect options.
func WithClientOption(fn func(*rueidis.ClientOption)) DialOption {
	if fn == nil {
		return dialOption{func(*dialConfig) {}, "WithClientOption(nil)"}
	}
	return dialOption{func(c *dialConfig) { c.clientOptions = append(c.clientOptions, fn) }, "WithClientOption(...)"}
}

// WithConnectWait bounds how long Dial waits for its clients to connect:
// rueidis.NewClient connects before it returns, for up to its dial timeout
// when a server is hung. Dial makes the clients in parallel; a client not
// made when d has passed gets a node that waits for it (see Dial); with 0,
// Dial does not wait.
// Default: core.DefaultNodeTimeout (50 ms).
// A negative d makes Dial return an error matching
// core.ErrInvalidArgument.
func WithConnectWait(d time.Duration) DialOption {
	return dialOption{func(c *dialConfig) {
		if d < 0 {
			c.errs = append(c.errs, fmt.Errorf("WithConnectWait(%v): the wait is negative", d))
		}
		c.wait = d
	}, "WithConnectWait(" + d.String() + ")"}
}

// Dial returns one node per address, each an independent Redis master (one
// Redlock node), over a rueidis client of its own made from ClientOption
// with ForceSingleClient; with WithCluster(true), one node over a cluster
// client of the cluster the addresses are seeds of. Addresses are "host:port";
// each node is named by its address as given (trimmed), a cluster
// "cluster:" and its sorted seeds. Defaults: no authentication, plain TCP,
// ClientOption's settings, a connect wait of core.DefaultNodeTimeout.
//
// rueidis connects when a client is made. Dial makes the clients in
// parallel and waits for them at most the connect wait (WithConnectWait).
// A server that refuses connections does not hold it up: its client comes
// back at once and connects again when used. A client still connecting
// when the wait ends (a hung server) gets a node at once, whose calls wait
// for the client within their own context (for core, a node timeout, as
// for any hung server) and then go through it; that node is not a *Node,
// but has the same core capabilities. Should that NewClient fail (a
// cluster none of whose seeds answered), its node fails every call with
// rueidis's error. Dial sends no command beyond rueidis's connection
// handshake.
//
// Each node owns its client: closing the node, as core.Locker.Close does,
// closes it; a node still connecting cuts the connection attempt short
// and closes the client once NewClient has returned. closeAll closes every
// node Dial returned; it is idempotent, so it is safe after Locker.Close,
// and it is for when core.New fails or is never called.
//
// No addresses, an empty one, one without a port, one given twice, or
// options that break what a lock node needs get an error matching
// core.ErrInvalidArgument (a nil DialOption is skipped); so does
// WithCluster(true) over servers that are not a cluster, and a cluster
// none of whose seeds answers within the wait makes Dial fail with
// rueidis's error. On error Dial returns no nodes
// and has closed what it made.
func Dial(addrs []string, opts ...DialOption) (nodes []core.Node, closeAll func() error, err error) {
	addrs, c, err := prepareDial(addrs, opts)
	if err != nil {
		return nil, nil, err
	}
	targets := [][]string{addrs}
	if !c.cluster {
		targets = make([][]string, len(addrs))
		for i, a := range addrs {
			targets[i] = []string{a}
		}
	}
	options := make([]rueidis.ClientOption, len(targets))
	for i, t := range targets {
		if options[i], err = c.clientOptionFor(t); err != nil {
			return nil, nil, err
		}
	}
	builds := make([]*build, len(targets))
	for i, t := range targets {
		builds[i] = startBuild(options[i], nodeName(t, c.cluster), c.cluster)
	}
	awaitBuilds(builds, c.wait)
	nodes = make([]core.Node, 0, len(builds))
	var errs []error
	for _, b := range builds {
		node, err := b.result()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		nodes = append(nodes, node)
	}
	if len(errs) > 0 {
		_ = driver.CloseAll(nodes)()
		return nil, nil, errors.Join(errs...)
	}
	return nodes, driver.CloseAll(nodes), nil
}

// prepareDial checks Dial's arguments and returns the trimmed addresses
// and the configuration the options give.
func prepareDial(addrs []string, opts []DialOption) ([]string, *dialConfig, error) {
	addrs, err := driver.CheckAddrs("rueidis", addrs)
	if err != nil {
		return nil, nil, err
	}
	c := dialConfig{wait: core.DefaultNodeTimeout}
	for _, o := range opts {
		if o != nil {
			o.applyDial(&c)
		}
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, nil, fmt.Errorf("%w: rueidis: Dial: %w", core.ErrInvalidArgument, err)
	}
	return addrs, &c, nil
}

// nodeName names the node over addrs: a server by its address, a cluster
// by "cluster:" and its sorted seeds, as goredis names a cluster client.
func nodeName(addrs []string, cluster bool) string {
	if !cluster {
		return addrs[0]
	}
	return "cluster:" + strings.Join(slices.Sorted(slices.Values(addrs)), ",")
}

// tlsFor returns the TLS configuration of a client of addr, or nil when
// TLS is off.
func (c *dialConfig) tlsFor(addr string) *tls.Config {
	if !c.tls {
		return nil
	}
	return driver.TLSFor(c.tlsConfig, true, addr)
}

// clientOptionFor returns the options of the client over addrs (one
// server's address, or a cluster's seeds).
func (c *dialConfig) clientOptionFor(addrs []string) (rueidis.ClientOption, error) {
	o := ClientOption(slices.Clone(addrs)...)
	o.Username, o.Password, o.TLSConfig = c.username, c.password, c.tlsFor(addrs[0])
	o.ForceSingleClient = !c.cluster
	for _, fn := range c.clientOptions {
		fn(&o)
	}
	if fault := optionFault(&o, addrs, c.cluster); fault != "" {
		return rueidis.ClientOption{}, fmt.Errorf("%w: rueidis: Dial: WithClientOption %s", core.ErrInvalidArgument, fault)
	}
	return o, nil
}

// dialAdvice is what to give Dial instead of options that make a client
// that is not one Redlock node.
const dialAdvice = "give Dial the address of each independent master (not its replicas), or the seeds of one Redis Cluster with WithCluster(true)"

// optionFault says what in o, as the user's WithClientOption left it,
// a node made by Dial cannot have, or "".
func optionFault(o *rueidis.ClientOption, addrs []string, cluster bool) string {
	switch {
	case !slices.Equal(o.InitAddress, addrs):
		return fmt.Sprintf("changed ClientOption.InitAddress from %q to %q: the node would be named for servers it does not reach; give Dial the addresses",
			addrs, o.InitAddress)
	case cluster && o.ForceSingleClient:
		return "set ClientOption.ForceSingleClient, which makes a client of the first seed alone; leave it off with WithCluster(true)"
	case !cluster && !o.ForceSingleClient:
		return fmt.Sprintf("turned ClientOption.ForceSingleClient off for %s: without it a server that is down fails Dial, "+
			"and one that answers CLUSTER SLOTS becomes a cluster client; use WithCluster(true) for a cluster", addrs[0])
	case !o.AlwaysPipelining || o.DisableAutoPipelining:
		return "turned ClientOption.AlwaysPipelining off (or DisableAutoPipelining on): a lone call would then ignore its context's cancellation, " +
			"and the node timeout could not bound it"
	case o.PipelineMultiplex >= 0:
		return fmt.Sprintf("set ClientOption.PipelineMultiplex to %d: with more than one connection per server, the clean-up release "+
			"of a failed acquisition can overtake the SET it undoes and leave the key until its TTL; leave it -1", o.PipelineMultiplex)
	case o.Sentinel.MasterSet != "":
		return "set ClientOption.Sentinel: a Sentinel client moves to a promoted replica, which may lack a lock the master acknowledged; " + dialAdvice
	case len(o.Standalone.ReplicaAddress) > 0 || o.Standalone.EnableRedirect:
		return "set ClientOption.Standalone (replicas or redirects): the client would send commands to other servers than its primary; " + dialAdvice
	}
	return ""
}

// build is one rueidis.NewClient running on a goroutine of its own, and
// the node made over its client.
type build struct {
	name    string
	cluster bool
	gate    *dialGate
	done    chan struct{} // closed when NewClient has returned and node or err is set
	node    *Node
	err     error
}

// startBuild starts making the client of options o and its node, named
// name.
func startBuild(o rueidis.ClientOption, name string, cluster bool) *build {
	b := &build{name: name, cluster: cluster, gate: newDialGate(), done: make(chan struct{})}
	o.DialCtxFn = b.gate.wrap(baseDial(&o))
	go b.run(o)
	return b
}

func (b *build) run(o rueidis.ClientOption) {
	defer close(b.done)
	client, err := rueidis.NewClient(o)
	b.gate.finish()
	if client == nil {
		b.err = fmt.Errorf("rueidis: Dial: client of %s: %w", b.name, err)
		return
	}
	// With ForceSingleClient, err is the first dial's failure, and the
	// client dials again when used.
	if b.cluster && client.Mode() != rueidis.ClientModeCluster {
		client.Close()
		b.err = fmt.Errorf("%w: rueidis: Dial: WithCluster(true), but %s is not a Redis Cluster (rueidis made a client in mode %s): Dial its servers without WithCluster(true)",
			core.ErrInvalidArgument, b.name, client.Mode())
		return
	}
	node, err := New(client, WithName(b.name), WithCloseClient(true))
	if err != nil {
		client.Close()
		b.err = err
		return
	}
	b.node = node
}

// result returns the node of b: the *Node over its client once NewClient
// has returned, or, while it has not, a node that waits for it.
func (b *build) result() (core.Node, error) {
	select {
	case <-b.done:
		if b.err != nil {
			return nil, b.err
		}
		return b.node, nil
	default:
		return &lateNode{b: b}, nil
	}
}

// awaitBuilds waits until every build is done or wait has passed.
func awaitBuilds(builds []*build, wait time.Duration) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for _, b := range builds {
		select {
		case <-b.done:
		case <-timer.C:
			return
		}
	}
}

// dialFunc is the type of rueidis.ClientOption.DialCtxFn.
type dialFunc = func(ctx context.Context, dst string, dialer *net.Dialer, cfg *tls.Config) (net.Conn, error)

// baseDial returns how rueidis would dial with o: through o's DialCtxFn or
// DialFn, or as rueidis does by default.
func baseDial(o *rueidis.ClientOption) dialFunc {
	if o.DialCtxFn != nil {
		return o.DialCtxFn
	}
	if fn := o.DialFn; fn != nil {
		return func(_ context.Context, dst string, dialer *net.Dialer, cfg *tls.Config) (net.Conn, error) {
			return fn(dst, dialer, cfg)
		}
	}
	return func(ctx context.Context, dst string, dialer *net.Dialer, cfg *tls.Config) (net.Conn, error) {
		if cfg != nil {
			return (&tls.Dialer{NetDialer: dialer, Config: cfg}).DialContext(ctx, "tcp", dst)
		}
		return dialer.DialContext(ctx, "tcp", dst)
	}
}

// errConnectAborted fails a connection attempt cut short by the node's
// Close.
var errConnectAborted = errors.New("rueidis: the node was closed while its client was connecting")

// dialGate lets a node's Close cut short a NewClient that has not
// returned: rueidis connects and runs its handshake (HELLO) inside
// NewClient, with no context of the caller's, for up to its dial timeout
// when a server is hung. Until NewClient returns, the gate cancels the
// dials in progress on abort and closes the connections they made, so
// that the handshake fails at once; after, it lets dials through as they
// are.
type dialGate struct {
	ctx    context.Context // ends at abort
	cancel context.CancelFunc

	mu      sync.Mutex
	making  bool       // NewClient has not returned
	aborted bool       // abort was called
	conns   []net.Conn // made while making
}

func newDialGate() *dialGate {
	ctx, cancel := context.WithCancel(context.Background())
	return &dialGate{ctx: ctx, cancel: cancel, making: true}
}

// wrap returns dial, watched by the gate.
func (g *dialGate) wrap(dial dialFunc) dialFunc {
	return func(ctx context.Context, dst string, dialer *net.Dialer, cfg *tls.Config) (net.Conn, error) {
		g.mu.Lock()
		making, aborted := g.making, g.aborted
		g.mu.Unlock()
		switch {
		case aborted:
			return nil, errConnectAborted
		case !making:
			return dial(ctx, dst, dialer, cfg)
		}
		ctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(g.ctx, cancel)
		conn, err := dial(ctx, dst, dialer, cfg)
		stop()
		cancel()
		if err != nil {
			return nil, err
		}
		if !g.keep(conn) {
			_ = conn.Close()
			return nil, errConnectAborted
		}
		return conn, nil
	}
}

// keep records conn, made while NewClient runs, so that abort can close
// it; it reports false when abort came first.
func (g *dialGate) keep(conn net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.aborted {
		return false
	}
	if g.making {
		g.conns = append(g.conns, conn)
	}
	return true
}

// finish records that NewClient has returned: its connections belong to
// the client from now on.
func (g *dialGate) finish() {
	g.mu.Lock()
	g.making, g.conns = false, nil
	g.mu.Unlock()
}

// abort cuts short the dials and handshakes of a NewClient still running.
func (g *dialGate) abort() {
	g.mu.Lock()
	g.aborted = true
	conns := g.conns
	g.conns = nil
	g.mu.Unlock()
	g.cancel()
	for _, c := range conns {
		_ = c.Close()
	}
}

// lateNode is the node of a client that NewClient was still making when
// Dial returned (a hung server). Each call waits for the client within its
// own context, then goes through the *Node made over it; to core, the
// wait looks like a server that does not answer. Close cuts the
// connection attempt short, waits for NewClient to return and closes the
// client.
type lateNode struct {
	b      *build
	closed atomic.Bool
	once   sync.Once
}

var (
	_ driver.Batcher = (*lateNode)(nil)
	_ driver.Watcher = (*lateNode)(nil)
	_ driver.Sharded = (*lateNode)(nil)
)

// ready waits within ctx for the client and returns the node over it.
func (n *lateNode) ready(ctx context.Context) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n.closed.Load() {
		return nil, rueidis.ErrClosing
	}
	select {
	case <-n.b.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if n.b.err != nil {
		return nil, n.b.err
	}
	return n.b.node, nil
}

// SetNX implements core.Node.
func (n *lateNode) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	node, err := n.ready(ctx)
	if err != nil {
		return false, err
	}
	return node.SetNX(ctx, key, value, ttl)
}

// EvalSHA implements core.Node.
func (n *lateNode) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	node, err := n.ready(ctx)
	if err != nil {
		return nil, err
	}
	return node.EvalSHA(ctx, sha, keys, args)
}

// Eval implements core.Node.
func (n *lateNode) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	node, err := n.ready(ctx)
	if err != nil {
		return nil, err
	}
	return node.Eval(ctx, script, keys, args)
}

// EvalBatch implements driver.Batcher.
func (n *lateNode) EvalBatch(ctx context.Context, calls []driver.Call) {
	node, err := n.ready(ctx)
	if err != nil {
		driver.FailAll(calls, err)
		return
	}
	node.EvalBatch(ctx, calls)
}

// Watch implements driver.Watcher.
func (n *lateNode) Watch(ctx context.Context, channel string, notify func(message string)) (stop func(), err error) {
	node, err := n.ready(ctx)
	if err != nil {
		return nil, err
	}
	return node.Watch(ctx, channel, notify)
}

// Classify implements core.Node as Node.Classify does.
func (n *lateNode) Classify(err error) driver.ErrorKind {
	var classifier Node
	return classifier.Classify(err)
}

// Sharded implements driver.Sharded: true for a cluster.
func (n *lateNode) Sharded() bool { return n.b.cluster }

// String returns the node's name.
func (n *lateNode) String() string { return n.b.name }

// Close cuts short the client's connection attempt, waits for NewClient to
// return and closes the client; later calls return nil at once.
func (n *lateNode) Close() error {
	n.once.Do(func() {
		n.closed.Store(true)
		n.b.gate.abort()
		<-n.b.done
		if n.b.node != nil {
			_ = n.b.node.Close()
		}
	})
	return nil
}
