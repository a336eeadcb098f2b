package rueidis

import (
	"context"
	"errors"
	"fmt"
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

// Client is the part of a rueidis client that a Node uses. Every
// rueidis.Client implements it; New refuses those that are not one
// Redlock node (see New).
type Client interface {
	B() rueidis.Builder
	Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult
	Mode() rueidis.ClientMode
}

// Node is a quorumlock node over a rueidis client: one independent Redis
// master, or one Redis Cluster. Concurrent calls share the client's
// connection through rueidis's auto-pipelining. It never closes the client.
type Node struct {
	client  Client
	name    string
	cluster bool
	owned   bool        // Close closes the client
	closed  atomic.Bool // set by Close on an owned client

	watchMu  sync.Mutex
	watching map[string]int // channel: Watch subscriptions not yet stopped
}

var _ core.Node = (*Node)(nil)

// Option configures a Node. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil Option is skipped. Its
// String shows the option as written.
type Option interface {
	apply(*config)
	String() string
}

type config struct {
	name  string
	owned bool
}

type option struct {
	fn   func(*config)
	name string
}

func (o option) apply(c *config) { o.fn(c) }
func (o option) String() string  { return o.name }

// WithName names the node in errors, logs and metrics; "" keeps the
// default. core.New refuses two nodes of one name in a Locker. Give it
// when the client was not built from ClientOption.
// Default: the addresses of the servers the client knows (see New).
func WithName(name string) Option {
	return option{func(c *config) { c.name = name }, "WithName(" + strconv.Quote(name) + ")"}
}

// WithCloseClient, on, makes Node.Close close the client, and every call
// after it fail with rueidis.ErrClosing, without reaching the client. Use
// it when the node is the client's only user. Off, the client is the
// caller's to close.
//
// It also shields the node from a flaw of rueidis v1.0.79's cluster
// client: closing its connections triggers a topology refresh that
// connects again, about a second later, so calls through a closed cluster
// client can succeed.
// Default: off.
func WithCloseClient(on bool) Option {
	return option{func(c *config) { c.owned = on }, "WithCloseClient(" + strconv.FormatBool(on) + ")"}
}

// ClientOption returns rueidis options suited to a lock node whose servers
// are addrs (one address for a single master; any of a cluster's for a
// cluster, which rueidis detects):
//
//   - DisableCache: no CLIENT TRACKING. The lock protocol does not read
//     through the cache, and managed Redis services (ElastiCache,
//     Memorystore) refuse the command;
//   - DisableRetry: rueidis retries read-only commands on network errors;
//     the protocol has none worth retrying inside one node call (core
//     retries whole rounds);
//   - AlwaysPipelining: every call goes through rueidis's pipelining queue,
//     where a call returns as soon as its context ends, cancellation
//     included. Without it, a lone call with a deadline runs synchronously:
//     cancellation is ignored, and when the deadline hits a server that does
//     not answer, closing the broken connection costs up to one more second
//     (measured here: 1.0 s for a 200 ms node timeout);
//   - PipelineMultiplex -1: one pipelined connection per server, which
//     keeps the commands of one Locker in order on it. The clean-up release
//     of a failed acquisition must reach a server after the SET it undoes,
//     even when that SET's call was cancelled in flight (a fail-fast round
//     cancels the calls it no longer needs). rueidis spreads commands over
//     several connections by default (2 to 4 per server), where the release
//     can overtake the SET and leave a key that blocks everyone until its
//     TTL runs out: measured here, 32 contending goroutines on 3 servers
//     stalled for minutes with the default and finish in seconds with one;
//   - Dialer.Timeout 5 s: a node that stops answering is found dead in
//     seconds, not the 10 s default;
//   - ConnWriteTimeout 2 s: a cluster client's Receive on a broken
//     connection opens a new one and waits for its handshake without the
//     caller's context, bounded only by this, so a Watch on a hung master
//     fails about 2 s after its context ends (5 s failed the conformance
//     test WatchOnPausedServer's 3 s bound, once in CI).
//
// Adjust the rest (credentials, TLS) before rueidis.NewClient. rueidis
// treats a server that answers CLUSTER SLOTS as a cluster: set
// ForceSingleClient for one that answers it without being one (miniredis
// does, which is why the examples and fxmodule set it for miniredis).
func ClientOption(addrs ...string) rueidis.ClientOption {
	o := rueidis.ClientOption{
		InitAddress:       addrs,
		DisableCache:      true,
		DisableRetry:      true,
		ConnWriteTimeout:  2 * time.Second,
		AlwaysPipelining:  true,
		PipelineMultiplex: -1,
	}
	o.Dialer.Timeout = 5 * time.Second
	return o
}

// New returns a Node that runs the lock protocol through client. Its
// default name is the addresses of the servers the client knows, sorted
// and joined by commas, when the client can tell them, and otherwise the
// client's type. A client of one server is named by its address alone
// ("127.0.0.1:6379"), as backends/goredis names it; a client in another
// mode has the mode first ("cluster:127.0.0.1:7000,127.0.0.1:7001,...").
//
// The client must be one Redlock node: a key it writes stays on one server
// (for a cluster, on its slot's master), and an acknowledged write is lost
// only when that server restarts. New refuses, with an error matching
// core.ErrInvalidArgument, a Sentinel client (Mode sentinel) and a client
// of a primary with replicas or redirects (Standalone.ReplicaAddress,
// Standalone.EnableRedirect), which rueidis builds with a type of its own.
// A client that wraps another (rueidisotel, rueidishook, a type of the
// caller's) is judged by the Mode and Nodes it reports: a wrapped client
// with replicas is refused, one with redirects alone cannot be told apart.
func New(client Client, opts ...Option) (*Node, error) {
	if driver.IsNil(client) {
		return nil, fmt.Errorf("%w: rueidis: client is nil", core.ErrInvalidArgument)
	}
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	name := c.name
	if name == "" {
		name = describe(client)
	}
	if err := refuseTopology(client, name); err != nil {
		return nil, err
	}
	return &Node{client: client, name: name, cluster: client.Mode() == rueidis.ClientModeCluster, owned: c.owned}, nil
}

func describe(client Client) string {
	full, ok := client.(rueidis.Client)
	if !ok {
		return fmt.Sprintf("%T", client)
	}
	addrs := make([]string, 0, 4)
	for addr := range full.Nodes() {
		addrs = append(addrs, addr)
	}
	slices.Sort(addrs)
	if client.Mode() == rueidis.ClientModeStandalone {
		return strings.Join(addrs, ",")
	}
	return string(client.Mode()) + ":" + strings.Join(addrs, ",")
}

// Client returns the client the node was built with.
func (n *Node) Client() Client { return n.client }

// Sharded implements driver.Sharded: true for a client in cluster mode,
// whose keys live on several servers, so that core's restart guard leaves
// the node out.
func (n *Node) Sharded() bool { return n.cluster }

// String returns the node's name.
func (n *Node) String() string { return n.name }

// Close does nothing unless the node was made with WithCloseClient(true):
// the client belongs to the caller, who closes it. With it, Close
// closes the client (once) and the node refuses every later call.
func (n *Node) Close() error {
	if n.owned && n.closed.CompareAndSwap(false, true) {
		if c, ok := n.client.(interface{ Close() }); ok {
			c.Close()
		}
	}
	return nil
}

// SetNX implements core.Node with SET key value NX PX ttl.
func (n *Node) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := n.check(ctx, nil); err != nil {
		return false, err
	}
	cmd := n.client.B().Set().Key(key).Value(value).Nx().PxMilliseconds(ttl.Milliseconds()).Build()
	reply, err := n.client.Do(ctx, cmd).ToString()
	switch {
	case err == nil && reply == "OK":
		return true, nil
	case err == nil:
		return false, fmt.Errorf("rueidis: unexpected reply %q to SET NX", reply)
	case rueidis.IsRedisNil(err):
		return false, nil // NX: the key exists
	}
	return false, n.explain(err)
}

// EvalSHA implements core.Node.
func (n *Node) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	if err := n.check(ctx, keys); err != nil {
		return nil, err
	}
	v, err := reply(n.client.Do(ctx, n.build(driver.Call{SHA: sha, Keys: keys, Args: args})))
	return v, n.explain(err)
}

// Eval implements core.Node.
func (n *Node) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	if err := n.check(ctx, keys); err != nil {
		return nil, err
	}
	v, err := reply(n.client.Do(ctx, n.build(driver.Call{Source: script, Keys: keys, Args: args})))
	return v, n.explain(err)
}

// check refuses a call on a context that has ended (nothing is sent), a
// call on a node closed with WithCloseClient(true), and, on a cluster,
// keys of
// different slots: rueidis's command builder panics on those, and no
// cluster master could run the script anyway.
func (n *Node) check(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n.closed.Load() {
		return rueidis.ErrClosing
	}
	return n.checkSlot(keys)
}

// checkSlot refuses, on a cluster, keys of different slots.
func (n *Node) checkSlot(keys []string) error {
	if n.cluster && len(keys) > 1 {
		slot := driver.HashSlot(keys[0])
		for _, k := range keys[1:] {
			if driver.HashSlot(k) != slot {
				return fmt.Errorf("%w: rueidis: keys %q and %q are in different cluster slots", core.ErrInvalidArgument, keys[0], k)
			}
		}
	}
	return nil
}

// Classify implements core.Node: NOSCRIPT replies are driver.KindNoScript,
// context errors driver.KindContext, and anything else (rueidis.ErrClosing,
// connection errors, server errors) a node failure.
func (n *Node) Classify(err error) driver.ErrorKind {
	if re, ok := rueidis.IsRedisErr(err); ok && re.IsNoScript() {
		return driver.KindNoScript
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return driver.KindContext
	}
	return driver.KindNodeFailure
}

// reply turns a script's reply into core.Node's types: nil and Lua false
// (a RESP3 boolean false on RESP3 connections) become nil, true becomes 1
// as RESP2 has it, and a Redis error is the error.
func reply(res rueidis.RedisResult) (any, error) {
	v, err := res.ToAny()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return driver.LuaReply(v), nil
}
