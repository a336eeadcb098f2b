package valkey

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// Node is a lock node over a valkey-go client: one master, or one cluster.
type Node struct {
	client         valkey.Client
	name           string
	cluster, owned bool
	closed         atomic.Bool
	mu             sync.Mutex
	watching       map[string]int // channel: watches not stopped
}

// Option configures New, and DialOption Dial. Options apply in order, a
// later one overriding an earlier one; a nil one is skipped. String shows
// an option as written (credentials and functions elided).
type Option interface {
	apply(*Node)
	String() string
}

type option[T any] struct {
	name string
	fn   func(T)
}

func (o option[T]) apply(v T)      { o.fn(v) }
func (o option[T]) String() string { return o.name }

// WithCloseClient, on, makes Close close the client, and later calls fail
// with valkey.ErrClosing; off, the client is the caller's to close.
// Default: off.
func WithCloseClient(on bool) Option {
	return option[*Node]{"WithCloseClient(" + strconv.FormatBool(on) + ")", func(n *Node) { n.owned = on }}
}

// WithName names the node in errors, logs and metrics; "" keeps the
// default. Default: the client's addresses (see New).
func WithName(name string) Option {
	return option[*Node]{"WithName(" + strconv.Quote(name) + ")", func(n *Node) { n.name = cmp.Or(name, n.name) }}
}

// ClientOption returns the options a lock node's client needs, for the
// server at addr, or a cluster's seeds (see the package doc).
func ClientOption(addrs ...string) valkey.ClientOption {
	o := valkey.ClientOption{InitAddress: addrs, DisableCache: true, DisableRetry: true,
		AlwaysPipelining: true, PipelineMultiplex: -1, ConnWriteTimeout: 2 * time.Second}
	o.Dialer.Timeout = 5 * time.Second
	return o
}

// New returns a Node over client, named by its sorted addresses, after
// "cluster:" for a cluster. It refuses a nil client and one that is not
// one Redlock node (Sentinel, replicas, redirects) with an error matching
// core.ErrInvalidArgument.
func New(client valkey.Client, opts ...Option) (*Node, error) {
	if driver.IsNil(client) {
		return nil, fmt.Errorf("%w: valkey: client is nil", driver.ErrInvalidArgument)
	}
	mode, addrs := client.Mode(), slices.Sorted(maps.Keys(client.Nodes()))
	n := &Node{client: client, name: strings.Join(addrs, ","), cluster: mode == valkey.ClientModeCluster, watching: map[string]int{}}
	if n.cluster {
		n.name = "cluster:" + n.name
	}
	for _, o := range opts {
		if o != nil {
			o.apply(n)
		}
	}
	if mode == valkey.ClientModeSentinel || !n.cluster && (len(addrs) > 1 || fmt.Sprintf("%T", client) == "*valkey.standalone") {
		return nil, fmt.Errorf("%w: valkey: client %s (%s) may write a lock to a replica or a new primary, which may lack it: "+
			"give each independent master a client of its own", driver.ErrInvalidArgument, n.name, mode)
	}
	return n, nil
}

func (n *Node) String() string { return n.name }
func (n *Node) Sharded() bool  { return n.cluster }

// Close closes the client, once, if the node was made with
// WithCloseClient(true).
func (n *Node) Close() error {
	if n.owned && n.closed.CompareAndSwap(false, true) {
		n.client.Close()
	}
	return nil
}

func (n *Node) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := n.check(ctx, nil); err != nil {
		return false, err
	}
	err := n.client.Do(ctx, n.client.B().Set().Key(key).Value(value).Nx().PxMilliseconds(ttl.Milliseconds()).Build()).Error()
	return err == nil, n.explain(err) // a nil reply: the key exists
}

func (n *Node) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	return n.eval(ctx, driver.Call{SHA: sha, Keys: keys, Args: args})
}

func (n *Node) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	return n.eval(ctx, driver.Call{Source: script, Keys: keys, Args: args})
}

func (n *Node) eval(ctx context.Context, c driver.Call) (any, error) {
	if err := n.check(ctx, c.Keys); err != nil {
		return nil, err
	}
	return n.reply(n.client.Do(ctx, n.build(c)))
}

// EvalBatch implements driver.Batcher with one DoMulti: one round trip.
func (n *Node) EvalBatch(ctx context.Context, calls []driver.Call) {
	cmds, sent := make([]valkey.Completed, 0, len(calls)), make([]int, 0, len(calls))
	for i, c := range calls {
		if calls[i].Reply, calls[i].Err = nil, n.check(ctx, c.Keys); calls[i].Err == nil {
			cmds, sent = append(cmds, n.build(c)), append(sent, i)
		}
	}
	for j, res := range n.client.DoMulti(ctx, cmds...) {
		calls[sent[j]].Reply, calls[sent[j]].Err = n.reply(res)
	}
}

func (n *Node) build(c driver.Call) valkey.Completed {
	b, nk := n.client.B(), int64(len(c.Keys))
	if c.Source != "" {
		return b.Eval().Script(c.Source).Numkeys(nk).Key(c.Keys...).Arg(c.Args...).Build()
	}
	return b.Evalsha().Sha1(c.SHA).Numkeys(nk).Key(c.Keys...).Arg(c.Args...).Build()
}

func (n *Node) reply(res valkey.ValkeyResult) (any, error) {
	v, err := res.ToAny()
	return driver.LuaReply(v), n.explain(err)
}

// check refuses a call on a closed node or an ended context, and on a
// cluster keys of several slots, where valkey-go's builder would panic.
func (n *Node) check(ctx context.Context, keys []string) error {
	if n.cluster && len(keys) > 1 {
		slot := driver.HashSlot(keys[0])
		for _, k := range keys[1:] {
			if driver.HashSlot(k) != slot {
				return fmt.Errorf("%w: valkey: keys %q and %q are in different cluster slots", driver.ErrInvalidArgument, keys[0], k)
			}
		}
	}
	if n.closed.Load() {
		return valkey.ErrClosing
	}
	return ctx.Err()
}

func (n *Node) Classify(err error) driver.ErrorKind {
	switch re, ok := valkey.IsValkeyErr(err); {
	case ok && re.IsNoScript():
		return driver.KindNoScript
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return driver.KindContext
	}
	return driver.KindNodeFailure
}

// explain drops a nil reply's error, and explains a cluster member's
// redirection to a client of one server (driver.ExplainCluster).
func (n *Node) explain(err error) error {
	switch {
	case valkey.IsValkeyNil(err):
		return nil
	case n.cluster:
		return err
	}
	return driver.ExplainCluster(err, "make one node of the whole cluster, over a client without ForceSingleClient")
}

// Watch implements driver.Watcher with Receive (SUBSCRIBE on the client's
// pipelined connection). After a lost connection it subscribes again,
// paced by driver.Backoff, and calls notify(""). stop ends Receive at
// once, and UNSUBSCRIBEs (within 250 ms) if it ends the node's last watch
// of channel.
func (n *Node) Watch(ctx context.Context, channel string, notify func(message string)) (stop func(), err error) {
	if err := n.check(ctx, nil); err != nil {
		return nil, err
	}
	n.count(channel, 1)
	var left atomic.Bool // uncounted, by the hook of the Receive that stop ended
	receive := func(ctx context.Context, subscribed func(), message func(string)) error {
		hctx := valkey.WithOnSubscriptionHook(ctx, func(s valkey.PubSubSubscription) {
			if s.Kind == "subscribe" && s.Channel == channel {
				subscribed()
			}
		})
		hctx = valkey.WithOnReceiveReturnHook(hctx, func(err error, cc valkey.CommandClient) error {
			if ctx.Err() != nil && left.CompareAndSwap(false, true) && n.count(channel, -1) == 0 {
				uctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
				defer cancel()
				_ = cc.Do(uctx, cc.B().Unsubscribe().Channel(channel).Build()).Error()
			}
			return err
		})
		return n.client.Receive(hctx, n.client.B().Subscribe().Channel(channel).Build(), func(m valkey.PubSubMessage) {
			if m.Channel == channel {
				message(m.Message)
			}
		})
	}
	gone := func(err error) bool { return n.closed.Load() || errors.Is(err, valkey.ErrClosing) }
	unsubscribe, err := driver.Resubscribe(ctx, receive, notify, gone)
	if err != nil {
		if left.CompareAndSwap(false, true) {
			n.count(channel, -1)
		}
		return nil, err
	}
	return func() {
		unsubscribe()
		if left.CompareAndSwap(false, true) {
			n.count(channel, -1)
		}
	}, nil
}

// count adds d to the node's watches of channel and returns their number.
func (n *Node) count(channel string, d int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.watching[channel] += d; n.watching[channel] == 0 {
		delete(n.watching, channel)
	}
	return n.watching[channel]
}

// DialOption configures Dial (see Option).
type DialOption interface {
	apply(*dialConfig)
	String() string
}

type dialConfig struct {
	user, password string
	tls, cluster   bool
	tlsConfig      *tls.Config
	fns            []func(*valkey.ClientOption)
}

// WithCredentials authenticates as the ACL user username, or with password
// alone when username is empty; two empty strings mean none.
// Default: none.
func WithCredentials(username, password string) DialOption {
	return option[*dialConfig]{"WithCredentials(...)", func(c *dialConfig) { c.user, c.password = username, password }}
}

// WithTLS, on, connects with TLS: WithTLSConfig's, or TLS 1.2 or later
// with the server name of each address (a cluster's first seed).
// Default: off.
func WithTLS(on bool) DialOption {
	return option[*dialConfig]{"WithTLS(" + strconv.FormatBool(on) + ")", func(c *dialConfig) { c.tls = on }}
}

// WithTLSConfig turns TLS on with a clone of cfg for each client, with the
// server name of each address when cfg names none; a nil cfg changes
// nothing. Default: none.
func WithTLSConfig(cfg *tls.Config) DialOption {
	return option[*dialConfig]{"WithTLSConfig(" + elided(cfg == nil) + ")", func(c *dialConfig) {
		c.tls, c.tlsConfig = c.tls || cfg != nil, cmp.Or(cfg, c.tlsConfig)
	}}
}

// WithCluster, on, makes the addresses the seeds of ONE cluster, one node;
// off, each address is an independent master. Default: off.
func WithCluster(on bool) DialOption {
	return option[*dialConfig]{"WithCluster(" + strconv.FormatBool(on) + ")", func(c *dialConfig) { c.cluster = on }}
}

// WithClientOption adds fn, called in order with the others on each
// client's options; a nil fn changes nothing. Default: ClientOption's.
// Dial returns an error matching core.ErrInvalidArgument when fn changes
// InitAddress, ForceSingleClient or the pipelining, or sets Sentinel or
// Standalone options.
func WithClientOption(fn func(*valkey.ClientOption)) DialOption {
	return option[*dialConfig]{"WithClientOption(" + elided(fn == nil) + ")", func(c *dialConfig) {
		if fn != nil {
			c.fns = append(c.fns, fn)
		}
	}}
}

// Dial returns one node per address (an independent master), or with
// WithCluster(true) one node of the cluster they are seeds of, named by
// its address or "cluster:" and the sorted seeds, each closing its client
// on Close. It waits for the clients core.DefaultNodeTimeout at most: the
// node of one still connecting (a hung server) waits for it within each
// call (driver.Late). closeAll closes every node.
func Dial(addrs []string, opts ...DialOption) (nodes []core.Node, closeAll func() error, err error) {
	if addrs, err = driver.CheckAddrs("valkey", addrs); err != nil {
		return nil, nil, err
	}
	var c dialConfig
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	groups, lates := [][]string{addrs}, []*driver.Late{}
	if !c.cluster {
		groups = slices.Collect(slices.Chunk(addrs, 1))
	}
	for _, g := range groups {
		o, name := ClientOption(g...), "cluster:"+strings.Join(slices.Sorted(slices.Values(g)), ",")
		if !c.cluster {
			name = g[0]
		}
		o.Username, o.Password, o.ForceSingleClient = c.user, c.password, !c.cluster
		o.TLSConfig = driver.TLSFor(c.tlsConfig, c.tls, g[0])

		for _, fn := range c.fns {
			fn(&o)
		}
		if !slices.Equal(o.InitAddress, g) || o.ForceSingleClient == c.cluster || !o.AlwaysPipelining || o.DisableAutoPipelining || o.PipelineMultiplex >= 0 ||
			o.Sentinel.MasterSet != "" || len(o.Standalone.ReplicaAddress) > 0 || o.Standalone.EnableRedirect {
			for _, l := range lates {
				_ = l.Close()
			}
			return nil, nil, fmt.Errorf("%w: valkey: Dial: WithClientOption changed InitAddress, ForceSingleClient, AlwaysPipelining, "+
				"DisableAutoPipelining or PipelineMultiplex, or set Sentinel or Standalone options: a lock node needs them as Dial sets them", driver.ErrInvalidArgument)
		}
		lates = append(lates, driver.StartLate(name, c.cluster, func(l *driver.Late) (driver.Node, error) {
			o.DialCtxFn = l.DialFunc(o.DialCtxFn, o.DialFn) // valkey-go's order: DialCtxFn, then DialFn
			client, err := valkey.NewClient(o)              // with ForceSingleClient, a client even if the server is down
			if client == nil {
				return nil, fmt.Errorf("valkey: Dial: client of %s: %w", name, err)
			}
			n, err := New(client, WithName(name), WithCloseClient(true))
			if err == nil && c.cluster != n.cluster {
				err = fmt.Errorf("%w: valkey: Dial: WithCluster(true), but %s is not a cluster", driver.ErrInvalidArgument, name)
			}
			if err != nil {
				client.Close()
				return nil, err
			}
			return n, nil
		}))
	}
	return driver.AwaitAll(lates, core.DefaultNodeTimeout)
}

// elided is how String shows a pointer or function argument.
func elided(isNil bool) string {
	if isNil {
		return "nil"
	}
	return "..."
}
