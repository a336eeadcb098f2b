package rueidis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

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
	client Client
	common driver.Common
}

var _ driver.Pipelined = (*Node)(nil)

// Option configures a Node. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil Option is skipped. Its
// String shows the option as written. Dial takes DialOptions instead.
type Option interface{ driver.Option[config] }

type config struct{ driver.NodeConfig }

// WithName names the node in errors, logs and metrics; "" keeps the
// default. core.New refuses two nodes of one name in a Locker. Give it
// when the client was not built from ClientOption.
// Default: the addresses of the servers the client knows (see New).
func WithName(name string) Option { return driver.WithName[config](name) }

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
func WithCloseClient(on bool) Option { return driver.WithCloseClient[config](on) }

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
	o := rueidis.ClientOption{InitAddress: addrs, DisableCache: true, DisableRetry: true,
		ConnWriteTimeout: 2 * time.Second, AlwaysPipelining: true, PipelineMultiplex: -1}
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
	c, err := driver.NewConfig("rueidis", client, opts)
	if err != nil {
		return nil, err
	}
	name := cmp.Or(c.Name, describe(client))
	if err := refuseTopology(client, name); err != nil {
		return nil, err
	}
	return &Node{client: client, common: driver.Common{Pkg: "rueidis", Name: name, Cluster: client.Mode() == rueidis.ClientModeCluster,
		Owner: driver.NewOwner(c.CloseClient)}}, nil
}

func describe(client Client) string {
	full, ok := client.(rueidis.Client)
	if !ok {
		return fmt.Sprintf("%T", client)
	}
	addrs := slices.Sorted(maps.Keys(full.Nodes()))
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
func (n *Node) Sharded() bool { return n.common.Cluster }

// String returns the node's name.
func (n *Node) String() string { return n.common.Name }

// Close does nothing unless the node was made with WithCloseClient(true):
// the client belongs to the caller, who closes it. With it, Close
// closes the client (once) and the node refuses every later call.
func (n *Node) Close() error {
	return n.common.Close(n.client)
}

// SetNX implements core.Node with SET key value NX PX ttl.
func (n *Node) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := n.common.Check(ctx, rueidis.ErrClosing, nil); err != nil {
		return false, err
	}
	cmd := n.client.B().Set().Key(key).Value(value).Nx().PxMilliseconds(ttl.Milliseconds()).Build()
	switch reply, err := n.client.Do(ctx, cmd).ToString(); {
	case err == nil && reply == "OK":
		return true, nil
	case err == nil:
		return false, fmt.Errorf("rueidis: unexpected reply %q to SET NX", reply)
	default:
		return false, n.explain(err) // nil for a nil reply: NX, the key exists
	}
}

// EvalSHA implements core.Node.
func (n *Node) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	return n.eval(ctx, driver.Call{SHA: sha, Keys: keys, Args: args})
}

// Eval implements core.Node.
func (n *Node) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	return n.eval(ctx, driver.Call{Source: script, Keys: keys, Args: args})
}

// eval runs c, an EVAL or EVALSHA, with Do. It sends nothing on a context
// that has ended, on a node closed with WithCloseClient(true), and, on a
// cluster, for keys of different slots: rueidis's command builder panics
// on those, and no cluster master could run the script anyway.
func (n *Node) eval(ctx context.Context, c driver.Call) (any, error) {
	if err := n.common.Check(ctx, rueidis.ErrClosing, c.Keys); err != nil {
		return nil, err
	}
	return n.reply(n.client.Do(ctx, n.build(c)))
}

// Classify implements core.Node: NOSCRIPT replies are driver.KindNoScript,
// context errors driver.KindContext, and anything else (rueidis.ErrClosing,
// connection errors, server errors) a node failure.
func (n *Node) Classify(err error) driver.ErrorKind {
	re, ok := rueidis.IsRedisErr(err)
	return driver.Classification(err, ok && re.IsNoScript())
}

// reply turns a script's reply into core.Node's types: nil and Lua false
// (a RESP3 boolean false on RESP3 connections) become nil, true becomes 1
// as RESP2 has it, and a Redis error is the error (explained).
func (n *Node) reply(res rueidis.RedisResult) (any, error) {
	v, err := res.ToAny()
	if err != nil {
		return nil, n.explain(err)
	}
	return driver.LuaReply(v), nil
}

// multiDoer is the part of a rueidis client that EvalBatch pipelines
// with; rueidis.Client has it.
type multiDoer interface {
	DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult
}

// receiver is the part of a rueidis client that Watch subscribes with;
// rueidis.Client has it.
type receiver interface {
	Receive(ctx context.Context, subscribe rueidis.Completed, fn func(msg rueidis.PubSubMessage)) error
}

// EvalBatch implements driver.Batcher with one DoMulti: every call (EVAL
// when its Source is set, else EVALSHA) is written to the client's
// pipeline at once, one round trip; on a cluster, rueidis sends each call
// to the master of its keys' slot. A call's error (NOSCRIPT among them)
// is its own; the others still run. On a cluster, a call whose keys are
// in different slots gets an error wrapping core.ErrInvalidArgument and is
// not sent. A context that has already ended, or a node closed with
// WithCloseClient(true), sends nothing. A client without DoMulti gets the calls one
// by one, in order, with Do.
func (n *Node) EvalBatch(ctx context.Context, calls []driver.Call) {
	if err := n.common.Check(ctx, rueidis.ErrClosing, nil); err != nil {
		driver.FailAll(calls, err)
		return
	}
	md, ok := n.client.(multiDoer)
	if !ok {
		driver.EvalEach(ctx, n, calls)
		return
	}
	cmds := make([]rueidis.Completed, 0, len(calls))
	sent := make([]int, 0, len(calls)) // index in calls of each of cmds
	for i, c := range calls {
		if calls[i].Reply, calls[i].Err = nil, driver.CheckSlot("rueidis", n.common.Cluster, c.Keys); calls[i].Err == nil {
			cmds, sent = append(cmds, n.build(c)), append(sent, i)
		}
	}
	if len(cmds) == 0 {
		return
	}
	for j, res := range md.DoMulti(ctx, cmds...) {
		calls[sent[j]].Reply, calls[sent[j]].Err = n.reply(res)
	}
}

func (n *Node) build(c driver.Call) rueidis.Completed {
	b := n.client.B()
	if c.Source != "" {
		return b.Eval().Script(c.Source).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
	}
	return b.Evalsha().Sha1(c.SHA).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
}

// unsubscribeTimeout bounds the UNSUBSCRIBE that a Watch's stop sends, so
// that stop stays short on a server that does not answer (the
// subscription then lasts until the connection closes, harmlessly).
const unsubscribeTimeout = 250 * time.Millisecond

// Watch implements driver.Watcher with rueidis's Receive: SUBSCRIBE channel,
// on the connection the client pipelines its commands on, and Watch
// returns once the server has confirmed it (seen through
// rueidis.WithOnSubscriptionHook), or with Receive's error if it failed
// first, or ctx's error. Receive then calls notify with each message on
// channel from a goroutine of Watch's. If Receive ends while the
// subscription should last (a lost connection), the goroutine subscribes
// again, pacing its attempts, and calls notify once subscribed again,
// since a release may have been missed in between.
//
// stop cancels Receive's context, which rueidis honours at once even when
// the server does not answer, and waits for the goroutine; it may be
// called more than once. When it ends the node's last watch of the
// channel, stop also sends UNSUBSCRIBE on that connection (waiting for
// the server at most 250 ms): rueidis leaves the server's subscription in
// place when Receive returns, and the connection would otherwise keep
// receiving every later release of the key.
//
// A client without Receive makes Watch return an error matching
// errors.ErrUnsupported, and a node closed with WithCloseClient(true)
// refuses with rueidis.ErrClosing.
func (n *Node) Watch(ctx context.Context, channel string, notify func(message string)) (stop func(), err error) {
	if err := n.common.Check(ctx, rueidis.ErrClosing, nil); err != nil {
		return nil, err
	}
	recv, ok := n.client.(receiver)
	if !ok {
		return nil, fmt.Errorf("rueidis: client %T has no Receive method: %w", n.client, errors.ErrUnsupported)
	}
	return n.common.Watch(ctx, channel, func(leave func() bool) driver.ReceiveFunc {
		return func(ctx context.Context, subscribed func(), message func(string)) error {
			// The hook runs on rueidis's reading goroutine, also when another
			// Receive on the connection subscribes to the same channel;
			// Resubscribe counts one confirmation per attempt.
			rctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
				if s.Kind == "subscribe" && s.Channel == channel {
					subscribed()
				}
			})
			rctx = rueidis.WithOnReceiveReturnHook(rctx, func(err error, cc rueidis.CommandClient) error {
				if ctx.Err() != nil && leave() {
					uctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
					defer cancel()
					_ = cc.Do(uctx, cc.B().Unsubscribe().Channel(channel).Build()).Error()
				}
				return err
			})
			return recv.Receive(rctx, n.client.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
				if m.Channel == channel {
					message(m.Message)
				}
			})
		}
	}, notify, func(err error) bool { return n.common.Closed() || errors.Is(err, rueidis.ErrClosing) })
}
