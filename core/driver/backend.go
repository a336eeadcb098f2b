package driver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Pipelined is a Node that batches and watches: what every Redis backend's
// node implements.
type Pipelined interface {
	Node
	Batcher
	Watcher
}

// Option is an option of a Redis backend's New or Dial: it sets part of C,
// the backend's configuration, and String shows it as written
// (credentials and functions elided). A backend's Option and DialOption
// types embed it.
type Option[C any] interface {
	Apply(*C)
	String() string
}

// Setting is an Option made of its text and what it sets.
type Setting[C any] struct {
	Text string
	Set  func(*C)
}

// Apply calls Set, if any, on c.
func (s Setting[C]) Apply(c *C) {
	if s.Set != nil {
		s.Set(c)
	}
}

// String returns Text.
func (s Setting[C]) String() string { return s.Text }

// Configure applies opts to c in order, a later one overriding an earlier
// one of the same kind, and skips the nil ones.
func Configure[C any, O Option[C]](c *C, opts []O) *C {
	for _, o := range opts {
		if !IsNil(o) {
			o.Apply(c)
		}
	}
	return c
}

// AddFunc is a backend's option that takes a function to call on the
// options of each client Dial makes, such as rueidis's WithClientOption:
// named name, it appends fn to the list field picks in the configuration;
// a nil fn changes nothing.
func AddFunc[C, T any](name string, fn func(T), field func(*C) *[]func(T)) Setting[C] {
	if fn == nil {
		return Setting[C]{Text: name + "(nil)"}
	}
	return Setting[C]{name + "(...)", func(c *C) { *field(c) = append(*field(c), fn) }}
}

// Anys returns the strings of lists, in order, as a []any: the arguments
// of a driver whose commands take ...any.
func Anys(lists ...[]string) []any {
	var out []any
	for _, l := range lists {
		for _, s := range l {
			out = append(out, s)
		}
	}
	return out
}

// CallAll calls each of fns on o, in order, and returns o.
func CallAll[T any](o T, fns []func(T)) T {
	for _, fn := range fns {
		fn(o)
	}
	return o
}

// NewConfig starts a backend's New: it refuses a nil client with an error
// matching ErrInvalidArgument naming pkg, and returns the configuration
// opts give.
func NewConfig[C any, O Option[C]](pkg string, client any, opts []O) (*C, error) {
	if IsNil(client) {
		return nil, fmt.Errorf("%w: %s: client is nil", ErrInvalidArgument, pkg)
	}
	return Configure(new(C), opts), nil
}

// Why a client is not one Redlock node, for NotOneNode: FailsOver for a
// client that follows a failover (Sentinel), KeyMoves for one whose keys
// can move between servers.
const (
	FailsOver = "moves to a promoted replica when its master fails; replication is asynchronous, so the replica may lack a lock " +
		"the master acknowledged, and the restart guard cannot tell (the replica has the birth key): two holders"
	KeyMoves = "one lock key can live on two servers over time: two holders"
)

// NotOneNode is New's error for a client that is not one Redlock node:
// it matches ErrInvalidArgument, and names pkg, the client's name, why
// (what the client does and why it lets two holders in) and advice (what
// to build instead).
func NotOneNode(pkg, name, why, advice string) error {
	return fmt.Errorf("%w: %s: client %s %s; %s", ErrInvalidArgument, pkg, name, why, advice)
}

// NodeConfig is what New's options set in every Redis backend. A
// backend's configuration embeds it.
type NodeConfig struct {
	// Name names the node (WithName); "" keeps the backend's default.
	Name string
	// CloseClient makes the node close its client (WithCloseClient).
	CloseClient bool
}

func (c *NodeConfig) nodeConfig() *NodeConfig { return c }

// HasNodeConfig is a configuration that embeds NodeConfig.
type HasNodeConfig interface{ nodeConfig() *NodeConfig }

// WithName is a backend's WithName: it names the node; "" keeps the default.
func WithName[C any, P interface {
	*C
	HasNodeConfig
}](name string) Setting[C] {
	return Setting[C]{"WithName(" + strconv.Quote(name) + ")", func(c *C) { P(c).nodeConfig().Name = name }}
}

// WithCloseClient is a backend's WithCloseClient: on, the node owns its
// client (see Owner).
func WithCloseClient[C any, P interface {
	*C
	HasNodeConfig
}](on bool) Setting[C] {
	return Setting[C]{"WithCloseClient(" + strconv.FormatBool(on) + ")", func(c *C) { P(c).nodeConfig().CloseClient = on }}
}

// Common is what every Redis backend's node keeps beside its client: the
// backend's name (Pkg, for errors), the node's name, whether its client is
// a cluster client (its keys live on several servers), whether it owns
// its client (Owner), and its watches (Watches).
type Common struct {
	Pkg, Name string
	Cluster   bool
	Owner
	Watches
}

// Check is what a node checks before it sends anything: the context has
// not ended (else its error), the node has not closed its client (else
// closed, the driver's error for a closed client), and, on a cluster, keys
// are in one slot (CheckSlot).
func (c *Common) Check(ctx context.Context, closed error, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.Closed() {
		return closed
	}
	return CheckSlot(c.Pkg, c.Cluster, keys)
}

// Explain turns a Redis Cluster reply (MOVED, ASK, CROSSSLOT) that
// reaches a node over a client of one server into a ClusterMemberError
// with advice (ExplainCluster). A cluster client follows redirections
// itself, so one that comes back through it is the cluster's own, left as
// it is.
func (c *Common) Explain(err error, advice string) error {
	if c.Cluster {
		return err
	}
	return ExplainCluster(err, advice)
}

// Owner closes the client of a node that owns it (WithCloseClient(true)),
// once, after which the node refuses every call. Its zero value owns
// nothing.
type Owner struct {
	owned  bool
	closed atomic.Bool
}

// NewOwner returns an Owner that owns its client when owned.
func NewOwner(owned bool) Owner { return Owner{owned: owned} }

// Close closes client (with its Close method, with or without an error)
// the first time it is called on an Owner that owns its client, and
// returns the error; otherwise it returns nil.
func (o *Owner) Close(client any) error {
	if !o.owned || !o.closed.CompareAndSwap(false, true) {
		return nil
	}
	switch c := client.(type) {
	case interface{ Close() error }:
		return c.Close()
	case interface{ Close() }:
		c.Close()
	}
	return nil
}

// Closed reports whether Close has closed the client.
func (o *Owner) Closed() bool { return o.closed.Load() }

// Owned returns node, made by a Dial over a client it owns, or, when
// making it failed with err, closes client (see Owner.Close) and returns
// err, joined with Close's error if any.
func Owned[N Node](node N, err error, client any) (Node, error) {
	if err != nil {
		o := NewOwner(true)
		if cerr := o.Close(client); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		return nil, err
	}
	return node, nil
}

// AfterDone calls fn on a goroutine of its own once ctx is done, as
// context.AfterFunc does, and returns a stop that cancels the call or,
// when fn has begun, waits for it to end: no goroutine of it outlives
// stop.
func AfterDone(ctx context.Context, fn func()) (stop func()) {
	done := make(chan struct{})
	cancel := context.AfterFunc(ctx, func() { defer close(done); fn() })
	return func() {
		if !cancel() {
			<-done
		}
	}
}

// Classification is the shared part of a Redis node's Classify:
// KindNoScript when noScript (the driver saw a NOSCRIPT reply), KindContext
// for an error of a context, and KindNodeFailure for anything else.
func Classification(err error, noScript bool) ErrorKind {
	switch {
	case noScript:
		return KindNoScript
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return KindContext
	}
	return KindNodeFailure
}

// CheckSlot refuses, on a cluster, keys of different hash slots, with an
// error matching ErrInvalidArgument naming pkg, the backend: no cluster
// master could run a script over them.
func CheckSlot(pkg string, cluster bool, keys []string) error {
	if !cluster || len(keys) < 2 {
		return nil
	}
	slot := HashSlot(keys[0])
	for _, k := range keys[1:] {
		if HashSlot(k) != slot {
			return fmt.Errorf("%w: %s: keys %q and %q are in different cluster slots", ErrInvalidArgument, pkg, keys[0], k)
		}
	}
	return nil
}

// Watches counts a node's watches per channel, so that the last one to
// stop can unsubscribe the connection they share. The zero value is ready
// to use.
type Watches struct {
	mu sync.Mutex
	n  map[string]int
}

// Add counts a watch of channel and returns its leave: leave uncounts the
// watch the first time it is called and reports whether it was the
// channel's last; later calls report what the first did.
func (w *Watches) Add(channel string) (leave func() (last bool)) {
	w.mu.Lock()
	if w.n == nil {
		w.n = make(map[string]int)
	}
	w.n[channel]++
	w.mu.Unlock()
	return sync.OnceValue(func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.n[channel]--; w.n[channel] > 0 {
			return false
		}
		delete(w.n, channel)
		return true
	})
}

// Watch is Resubscribe (see there) for a watch of channel counted in w.
// receive gets the watch's leave (see Add), for the attempt that stop
// ended to unsubscribe the connection when the watch was the channel's
// last; stop, and a Watch that fails, leave too.
func (w *Watches) Watch(ctx context.Context, channel string, receive func(leave func() bool) ReceiveFunc,
	notify func(string), done func(error) bool) (stop func(), err error) {
	leave := w.Add(channel)
	unsubscribe, err := Resubscribe(ctx, receive(leave), notify, done)
	if err != nil {
		leave()
		return nil, err
	}
	return func() { unsubscribe(); leave() }, nil
}

// DialConfig is what the Dial options shared by the Redis backends set.
// A backend's Dial configuration embeds it.
type DialConfig struct {
	Username, Password string
	TLS                bool
	TLSConfig          *tls.Config
	Cluster            bool
	// Wait bounds how long Dial waits for clients that connect when made
	// (DialLates).
	Wait time.Duration
	// Errs are the faults of options, reported by PrepareDial.
	Errs []error
}

func (c *DialConfig) dialConfig() *DialConfig { return c }

// HasDialConfig is a configuration that embeds DialConfig.
type HasDialConfig interface{ dialConfig() *DialConfig }

// TLSFor is TLSFor of the configuration's TLS options for the server at addr.
func (c *DialConfig) TLSFor(addr string) *tls.Config { return TLSFor(c.TLSConfig, c.TLS, addr) }

// Targets returns the address groups Dial makes a client of: addrs, one
// cluster, when Cluster is set; else one group per address.
func (c *DialConfig) Targets(addrs []string) [][]string {
	if c.Cluster {
		return [][]string{addrs}
	}
	return slices.Collect(slices.Chunk(addrs, 1))
}

// NodeName names the node over addrs: a server by its address, a cluster
// by "cluster:" and its sorted seeds.
func NodeName(addrs []string, cluster bool) string {
	if !cluster {
		return addrs[0]
	}
	return "cluster:" + strings.Join(slices.Sorted(slices.Values(addrs)), ",")
}

type dialPtr[C any] interface {
	*C
	HasDialConfig
}

// WithCredentials is a backend's WithCredentials: an ACL user and
// password, or a password alone with an empty username.
func WithCredentials[C any, P dialPtr[C]](username, password string) Setting[C] {
	return Setting[C]{"WithCredentials(...)", func(c *C) { P(c).dialConfig().Username, P(c).dialConfig().Password = username, password }}
}

// WithTLS is a backend's WithTLS.
func WithTLS[C any, P dialPtr[C]](on bool) Setting[C] {
	return Setting[C]{"WithTLS(" + strconv.FormatBool(on) + ")", func(c *C) { P(c).dialConfig().TLS = on }}
}

// WithTLSConfig is a backend's WithTLSConfig: it sets cfg and turns TLS
// on; a nil cfg changes nothing.
func WithTLSConfig[C any, P dialPtr[C]](cfg *tls.Config) Setting[C] {
	if cfg == nil {
		return Setting[C]{Text: "WithTLSConfig(nil)"}
	}
	return Setting[C]{"WithTLSConfig(...)", func(c *C) { P(c).dialConfig().TLS, P(c).dialConfig().TLSConfig = true, cfg }}
}

// WithCluster is a backend's WithCluster.
func WithCluster[C any, P dialPtr[C]](on bool) Setting[C] {
	return Setting[C]{"WithCluster(" + strconv.FormatBool(on) + ")", func(c *C) { P(c).dialConfig().Cluster = on }}
}

// WithConnectWait is a backend's WithConnectWait; a negative d is a fault
// that PrepareDial reports.
func WithConnectWait[C any, P dialPtr[C]](d time.Duration) Setting[C] {
	return Setting[C]{"WithConnectWait(" + d.String() + ")", func(c *C) {
		if d < 0 {
			P(c).dialConfig().Errs = append(P(c).dialConfig().Errs, fmt.Errorf("WithConnectWait(%v): the wait is negative", d))
		}
		P(c).dialConfig().Wait = d
	}}
}

// PrepareDial checks a Dial's addresses (CheckAddrs) and applies its
// options to c, then returns the trimmed addresses, or an error matching
// ErrInvalidArgument naming pkg.
func PrepareDial[C any, P dialPtr[C], O Option[C]](pkg string, addrs []string, c P, opts []O) ([]string, error) {
	addrs, err := CheckAddrs(pkg, addrs)
	if err != nil {
		return nil, err
	}
	Configure((*C)(c), opts)
	if err := errors.Join(c.dialConfig().Errs...); err != nil {
		return nil, fmt.Errorf("%w: %s: Dial: %w", ErrInvalidArgument, pkg, err)
	}
	return addrs, nil
}

// A Prepare checks the options of the client over target (one server's
// address, or a cluster's seeds) and returns how to make its node, or an
// error that fails the Dial before any client is made.
type Prepare[B any] func(target []string) (build B, err error)

// prepareAll runs prepare on every target of addrs (Targets).
func prepareAll[B any](c *DialConfig, addrs []string, prepare Prepare[B]) ([][]string, []B, error) {
	targets := c.Targets(addrs)
	builds := make([]B, len(targets))
	for i, t := range targets {
		var err error
		if builds[i], err = prepare(t); err != nil {
			return nil, nil, err
		}
	}
	return targets, builds, nil
}

// DialNodes makes the nodes of a Dial whose clients connect when first
// used: each target's build (see Prepare), in order. When one fails, it
// closes the nodes made and returns the error. closeAll is CloseAll's.
func (c *DialConfig) DialNodes(addrs []string, prepare Prepare[func() (Node, error)]) (nodes []Node, closeAll func() error, err error) {
	_, builds, err := prepareAll(c, addrs, prepare)
	if err != nil {
		return nil, nil, err
	}
	for _, build := range builds {
		node, err := build()
		if err != nil {
			_ = CloseAll(nodes)()
			return nil, nil, err
		}
		nodes = append(nodes, node)
	}
	return nodes, CloseAll(nodes), nil
}

// DialLates makes the nodes of a Dial whose clients connect when made: it
// starts a Late per target (see Prepare), named by NodeName, and waits for
// them at most c.Wait (AwaitAll).
func (c *DialConfig) DialLates(addrs []string, prepare Prepare[func(*Late) (Node, error)]) ([]Node, func() error, error) {
	targets, builds, err := prepareAll(c, addrs, prepare)
	if err != nil {
		return nil, nil, err
	}
	lates := make([]*Late, len(targets))
	for i, t := range targets {
		lates[i] = StartLate(NodeName(t, c.Cluster), c.Cluster, builds[i])
	}
	return AwaitAll(lates, c.Wait)
}
