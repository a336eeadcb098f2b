package goredis

import (
	"crypto/tls"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// DialOption configures Dial. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil DialOption is skipped.
// Its String shows the option as written (credentials and functions
// elided). It has Option's shape (driver.Option) but not its type: a
// DialOption says how Dial makes clients, which means nothing to New, given
// a client already made; Dial names its nodes by address and owns their
// clients, which New's Options set. Two types let the compiler refuse an
// option given to the wrong function.
type DialOption interface{ driver.Option[dialConfig] }

type dialConfig struct {
	driver.DialConfig
	options        []func(*redis.Options)
	clusterOptions []func(*redis.ClusterOptions)
}

// WithCredentials authenticates every client Dial makes: as the Redis ACL
// user username with password, or, with an empty username, with password
// alone (requirepass, the "default" user). Two empty strings mean no
// authentication. Every value is valid (a wrong one fails the nodes'
// calls, not Dial).
// Default: no authentication.
func WithCredentials(username, password string) DialOption {
	return driver.WithCredentials[dialConfig](username, password)
}

// WithTLS, on, makes every client Dial makes connect with TLS, using a
// clone of the WithTLSConfig configuration for each client, or, without
// one, TLS 1.2 or later with the server name taken from the host of each
// address (of the first seed for a cluster). Off, clients use plain TCP.
// Default: off.
func WithTLS(on bool) DialOption { return driver.WithTLS[dialConfig](on) }

// WithTLSConfig sets the TLS configuration of every client Dial makes (a
// clone for each, with the server name taken from the host of each address
// when cfg names none), and turns TLS on, as WithTLS(true) does. A nil cfg
// changes nothing. Every value is valid.
// Default: none; with WithTLS(true), TLS 1.2 or later with the server name
// taken from the host of each address.
func WithTLSConfig(cfg *tls.Config) DialOption { return driver.WithTLSConfig[dialConfig](cfg) }

// WithCluster, on, makes the addresses the seeds of ONE Redis Cluster (any
// of its masters), which Dial makes one node of, over a
// *redis.ClusterClient: a cluster's masters are not independent voters.
// Off, every address is an independent master and a node of its own.
// Default: off.
func WithCluster(on bool) DialOption { return driver.WithCluster[dialConfig](on) }

// WithOptions calls fn on the options of each server's client, once per
// address, after Dial has set them from ClientOptions, WithCredentials and
// WithTLS, and before redis.NewClient: for the pool size, timeouts, the
// database, hooks. Each WithOptions adds its fn, called in order. A nil fn
// changes nothing.
// Default: ClientOptions' settings.
// Dial returns an error matching core.ErrInvalidArgument when fn changes
// Addr or turns ContextTimeoutEnabled off, and for WithOptions with
// WithCluster(true).
func WithOptions(fn func(*redis.Options)) DialOption {
	return driver.AddFunc("WithOptions", fn, func(c *dialConfig) *[]func(*redis.Options) { return &c.options })
}

// WithClusterOptions is WithOptions for the cluster client of
// WithCluster(true): fn gets the options set from ClusterOptions,
// WithCredentials and WithTLS. Each WithClusterOptions adds its fn, called
// in order. A nil fn changes nothing.
// Default: ClusterOptions' settings.
// Dial returns an error matching core.ErrInvalidArgument when fn changes
// Addrs, turns ContextTimeoutEnabled off or sets ClusterSlots, and for
// WithClusterOptions without WithCluster(true).
func WithClusterOptions(fn func(*redis.ClusterOptions)) DialOption {
	return driver.AddFunc("WithClusterOptions", fn, func(c *dialConfig) *[]func(*redis.ClusterOptions) { return &c.clusterOptions })
}

// Dial returns one node per address, each an independent Redis master (one
// Redlock node), over a *redis.Client of its own made from ClientOptions;
// with WithCluster(true), one node over a *redis.ClusterClient of the cluster the
// addresses are seeds of. Addresses are "host:port"; each node is named by
// its address as given (trimmed), a cluster "cluster:" and its sorted seeds.
// Defaults: no authentication, plain TCP, ClientOptions' (ClusterOptions')
// settings.
//
// Each node owns its client: closing the node, as core.Locker.Close does,
// closes it (each is a *Node made with WithCloseClient(true)). closeAll
// closes every
// node Dial returned; it is idempotent, so it is safe after Locker.Close,
// and it is for when core.New fails or is never called. go-redis connects on first use: Dial neither connects nor
// sends anything, so a server that is down or hung does not hold it up,
// and its node works once the server is back.
//
// No addresses, an empty one, one without a port, one given twice, or
// options that break what a lock node needs get an error matching
// core.ErrInvalidArgument (a nil DialOption is skipped); on error Dial returns no nodes and
// has closed what it made.
func Dial(addrs []string, opts ...DialOption) (nodes []core.Node, closeAll func() error, err error) {
	c := &dialConfig{}
	if addrs, err = driver.PrepareDial("goredis", addrs, c, opts); err != nil {
		return nil, nil, err
	}
	switch {
	case c.Cluster && len(c.options) > 0:
		return nil, nil, fmt.Errorf("%w: goredis: Dial: WithOptions sets the options of a client of one server; with WithCluster(true), use WithClusterOptions",
			core.ErrInvalidArgument)
	case !c.Cluster && len(c.clusterOptions) > 0:
		return nil, nil, fmt.Errorf("%w: goredis: Dial: WithClusterOptions sets the options of a cluster client; it needs WithCluster(true)",
			core.ErrInvalidArgument)
	}
	return c.DialNodes(addrs, func(target []string) (func() (driver.Node, error), error) {
		if c.Cluster {
			o, err := c.clusterOptionsFor(target)
			return func() (driver.Node, error) { return own(redis.NewClusterClient(o)) }, err
		}
		o, err := c.optionsFor(target[0])
		return func() (driver.Node, error) { return own(redis.NewClient(o)) }, err
	})
}

// optionsFor returns the options of the client of the server at addr.
func (c *dialConfig) optionsFor(addr string) (*redis.Options, error) {
	o := ClientOptions(addr)
	o.Username, o.Password, o.TLSConfig = c.Username, c.Password, c.TLSFor(addr)
	driver.CallAll(o, c.options)
	switch {
	case o.Addr != addr:
		return nil, fmt.Errorf("%w: goredis: Dial: WithOptions changed Options.Addr from %q to %q: the node would be named for a server it does not reach; give Dial the address",
			core.ErrInvalidArgument, addr, o.Addr)
	case !o.ContextTimeoutEnabled:
		return nil, fmt.Errorf("%w: goredis: Dial: WithOptions turned Options.ContextTimeoutEnabled off for %s: go-redis would ignore context deadlines on the socket, "+
			"and the node timeout could not bound a call to a server that does not answer", core.ErrInvalidArgument, addr)
	}
	return o, nil
}

// clusterOptionsFor returns the options of the client of the cluster that
// addrs are seeds of.
func (c *dialConfig) clusterOptionsFor(addrs []string) (*redis.ClusterOptions, error) {
	o := ClusterOptions(slices.Clone(addrs)...)
	o.Username, o.Password, o.TLSConfig = c.Username, c.Password, c.TLSFor(addrs[0])
	driver.CallAll(o, c.clusterOptions)
	switch {
	case !slices.Equal(o.Addrs, addrs):
		return nil, fmt.Errorf("%w: goredis: Dial: WithClusterOptions changed ClusterOptions.Addrs from %q to %q: give Dial the seeds",
			core.ErrInvalidArgument, addrs, o.Addrs)
	case !o.ContextTimeoutEnabled:
		return nil, fmt.Errorf("%w: goredis: Dial: WithClusterOptions turned ClusterOptions.ContextTimeoutEnabled off: go-redis would ignore context deadlines on the socket, "+
			"and the node timeout could not bound a call to a server that does not answer", core.ErrInvalidArgument)
	case o.ClusterSlots != nil:
		return nil, fmt.Errorf("%w: goredis: Dial: WithClusterOptions set ClusterOptions.ClusterSlots: the servers would not be a Redis Cluster checking that slot map, "+
			"so one lock key could live on two servers over time; leave it nil", core.ErrInvalidArgument)
	}
	return o, nil
}

// own makes the node of a client Dial made, which closes the client;
// it closes the client itself if New refuses it.
func own(client interface {
	Client
	Close() error
}) (core.Node, error) {
	node, err := New(client, WithCloseClient(true))
	return driver.Owned(node, err, client)
}
