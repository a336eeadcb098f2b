package goredis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

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
	options            []func(*redis.Options)
	clusterOptions     []func(*redis.ClusterOptions)
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
// authentication. Every value is valid (a wrong one fails the nodes'
// calls, not Dial).
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
// clone for each, with the server name taken from the host of each address
// when cfg names none), and turns TLS on, as WithTLS(true) does. A nil cfg
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
// of its masters), which Dial makes one node of, over a
// *redis.ClusterClient: a cluster's masters are not independent voters.
// Off, every address is an independent master and a node of its own.
// Default: off.
func WithCluster(on bool) DialOption {
	return dialOption{func(c *dialConfig) { c.cluster = on }, "WithCluster(" + strconv.FormatBool(on) + ")"}
}

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
	if fn == nil {
		return dialOption{func(*dialConfig) {}, "WithOptions(nil)"}
	}
	return dialOption{func(c *dialConfig) { c.options = append(c.options, fn) }, "WithOptions(...)"}
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
	if fn == nil {
		return dialOption{func(*dialConfig) {}, "WithClusterOptions(nil)"}
	}
	return dialOption{func(c *dialConfig) { c.clusterOptions = append(c.clusterOptions, fn) }, "WithClusterOptions(...)"}
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
	addrs, c, err := prepareDial(addrs, opts)
	if err != nil {
		return nil, nil, err
	}
	if c.cluster {
		o, err := c.clusterOptionsFor(addrs)
		if err != nil {
			return nil, nil, err
		}
		node, err := own(redis.NewClusterClient(o))
		if err != nil {
			return nil, nil, err
		}
		nodes = []core.Node{node}
		return nodes, driver.CloseAll(nodes), nil
	}
	all := make([]*redis.Options, len(addrs))
	for i, a := range addrs {
		if all[i], err = c.optionsFor(a); err != nil {
			return nil, nil, err
		}
	}
	for _, o := range all {
		node, err := own(redis.NewClient(o))
		if err != nil {
			_ = driver.CloseAll(nodes)()
			return nil, nil, err
		}
		nodes = append(nodes, node)
	}
	return nodes, driver.CloseAll(nodes), nil
}

// prepareDial checks Dial's arguments and returns the trimmed addresses
// and the configuration the options give.
func prepareDial(addrs []string, opts []DialOption) ([]string, *dialConfig, error) {
	addrs, err := driver.CheckAddrs("goredis", addrs)
	if err != nil {
		return nil, nil, err
	}
	var c dialConfig
	for _, o := range opts {
		if o != nil {
			o.applyDial(&c)
		}
	}
	switch {
	case c.cluster && len(c.options) > 0:
		return nil, nil, fmt.Errorf("%w: goredis: Dial: WithOptions sets the options of a client of one server; with WithCluster(true), use WithClusterOptions",
			core.ErrInvalidArgument)
	case !c.cluster && len(c.clusterOptions) > 0:
		return nil, nil, fmt.Errorf("%w: goredis: Dial: WithClusterOptions sets the options of a cluster client; it needs WithCluster(true)",
			core.ErrInvalidArgument)
	}
	return addrs, &c, nil
}

// optionsFor returns the options of the client of the server at addr.
func (c *dialConfig) optionsFor(addr string) (*redis.Options, error) {
	o := ClientOptions(addr)
	o.Username, o.Password, o.TLSConfig = c.username, c.password, driver.TLSFor(c.tlsConfig, c.tls, addr)
	for _, fn := range c.options {
		fn(o)
	}
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
	o.Username, o.Password, o.TLSConfig = c.username, c.password, driver.TLSFor(c.tlsConfig, c.tls, addrs[0])
	for _, fn := range c.clusterOptions {
		fn(o)
	}
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
	if err != nil {
		return nil, errors.Join(err, client.Close())
	}
	return node, nil
}
