package goredis

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// Client is the part of a go-redis client that a Node uses. *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient all
// implement it; New refuses those that are not one Redlock node (see New).
type Client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
}

// Node is a quorumlock node over a go-redis client: one independent Redis
// master, or one Redis Cluster. It closes the client only when made with
// WithCloseClient(true).
type Node struct {
	client Client
	common driver.Common
}

var _ driver.Pipelined = (*Node)(nil)

// Option configures a Node. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil Option is skipped. Its
// String shows the option as written. Dial takes DialOptions instead.
type Option interface{ driver.Option[config] }

type config struct {
	driver.NodeConfig
	allowNoCtxBounds bool
}

// WithName names the node in errors, logs and metrics; "" keeps the
// default. core.New refuses two nodes of one name in a Locker.
// Default: the client's address ("127.0.0.1:6379"), "cluster:" followed by
// a cluster client's addresses, sorted and joined by commas, or the
// client's type for other clients: for a server, the name backends/rueidis
// gives it too.
func WithName(name string) Option { return driver.WithName[config](name) }

// WithCloseClient, on, makes Node.Close close the client (once): for a
// node that is the client's only user, as Dial's are. Off, the client
// belongs to the caller, who closes it.
// Default: off.
func WithCloseClient(on bool) Option { return driver.WithCloseClient[config](on) }

// WithUnboundedCalls, on, accepts a client whose options leave
// ContextTimeoutEnabled false. Such a client ignores context deadlines on the
// socket and waits up to its ReadTimeout (3 s by default) for a node that
// does not answer, so the Locker's node timeout no longer bounds a round.
// Default: off; New refuses such a client with an error matching
// core.ErrInvalidArgument.
func WithUnboundedCalls(on bool) Option {
	return driver.Setting[config]{Text: "WithUnboundedCalls(" + strconv.FormatBool(on) + ")", Set: func(c *config) { c.allowNoCtxBounds = on }}
}

// ClientOptions returns go-redis options suited to a lock node at addr:
//
//   - ContextTimeoutEnabled, so that the node timeout bounds every call;
//   - MaxRetries -1: no command retries inside the node. Core retries whole
//     rounds, and a retry with backoff inside one node call only spends the
//     node timeout on a node that is down;
//   - DialerRetries 1: a refused connection fails at once instead of after
//     five dial attempts 100 ms apart.
//
// Adjust the rest (password, TLS, pool size) before passing the options to
// redis.NewClient. ClusterOptions is the same for a Redis Cluster.
func ClientOptions(addr string) *redis.Options {
	return &redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1}
}

// ClusterOptions returns go-redis cluster options suited to a lock node
// over the Redis Cluster that addrs (any of its masters) belong to, with
// the settings of ClientOptions. MaxRedirects keeps its default of 3:
// MOVED and ASK replies are followed (routing, not retries), and within
// that budget go-redis also tries a failed call again, always inside the
// node timeout, which the context carries.
func ClusterOptions(addrs ...string) *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1}
}

// New returns a Node that runs the lock protocol through client. The client
// must have ContextTimeoutEnabled set in its options (see
// WithUnboundedCalls), so that the node timeout bounds every call. New
// skips a nil Option.
//
// The client must also be one Redlock node: a key it writes stays on one
// server (or, for a Redis Cluster, on its slot's master), and an
// acknowledged write is lost only when that server restarts. New refuses,
// with an error matching core.ErrInvalidArgument, the client types that
// break this: a *redis.Ring, a Sentinel failover client
// (redis.NewFailoverClient, or redis.NewUniversalClient with MasterName),
// and a *redis.ClusterClient whose slot map comes from ClusterSlots
// (redis.NewFailoverClusterClient). Client types are recognised by their
// Options method, so a type of the caller's that embeds one of these
// clients counts as that client.
func New(client Client, opts ...Option) (*Node, error) {
	c, err := driver.NewConfig("goredis", client, opts)
	if err != nil {
		return nil, err
	}
	name, bounded := describe(client)
	if err := refuseTopology(client, name); err != nil {
		return nil, err
	}
	if !bounded && !c.allowNoCtxBounds {
		return nil, fmt.Errorf("%w: goredis: client %s has ContextTimeoutEnabled false, so contexts cannot bound its calls "+
			"and one slow node would stall every round; set ContextTimeoutEnabled: true in its options, or pass goredis.WithUnboundedCalls(true)",
			core.ErrInvalidArgument, name)
	}
	_, cluster := client.(clusterClient)
	return &Node{client: client, common: driver.Common{Pkg: "goredis", Name: cmp.Or(c.Name, name), Cluster: cluster, Owner: driver.NewOwner(c.CloseClient)}}, nil
}

// describe names a client and reports whether its calls honour context
// deadlines, for the client types whose options can be read.
func describe(client Client) (name string, bounded bool) {
	switch cl := client.(type) {
	case singleClient:
		return cl.Options().Addr, cl.Options().ContextTimeoutEnabled
	case clusterClient:
		return "cluster:" + strings.Join(slices.Sorted(slices.Values(cl.Options().Addrs)), ","), cl.Options().ContextTimeoutEnabled
	case ringClient:
		return "ring:" + strings.Join(slices.Sorted(maps.Values(cl.Options().Addrs)), ","), cl.Options().ContextTimeoutEnabled
	default:
		return fmt.Sprintf("%T", client), true
	}
}

// Client returns the client the node was built with.
func (n *Node) Client() Client { return n.client }

// Sharded implements driver.Sharded: true for a *redis.ClusterClient (or a
// type that embeds one), whose keys live on several servers, so that
// core's restart guard leaves the node out. A client of another type
// counts as one server.
func (n *Node) Sharded() bool { return n.common.Cluster }

// String returns the node's name.
func (n *Node) String() string { return n.common.Name }

// Close does nothing unless the node was made with WithCloseClient(true):
// the client belongs to the caller, who closes it. With it, the first Close
// closes the client, and later ones return nil.
func (n *Node) Close() error { return n.common.Close(n.client) }

// SetNX implements core.Node with SET key value PX ttl NX.
func (n *Node) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	cmd := redis.NewBoolCmd(ctx, "set", key, value, "px", ttl.Milliseconds(), "nx")
	_ = n.client.Process(ctx, cmd)
	ok, err := cmd.Result()
	return ok, n.explain(err) // a nil reply, no error: NX, the key exists
}

// EvalSHA implements core.Node.
func (n *Node) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	v, err := n.client.EvalSha(ctx, sha, keys, driver.Anys(args)...).Result()
	return v, n.explain(err)
}

// Eval implements core.Node.
func (n *Node) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	v, err := n.client.Eval(ctx, script, keys, driver.Anys(args)...).Result()
	return v, n.explain(err)
}

// Classify implements core.Node: NOSCRIPT replies are driver.KindNoScript,
// context errors driver.KindContext, and anything else a node failure.
func (n *Node) Classify(err error) driver.ErrorKind {
	return driver.Classification(err, redis.HasErrorPrefix(err, "NOSCRIPT"))
}
