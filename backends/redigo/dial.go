package redigo

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/gomodule/redigo/redis"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// DialOption configures Dial.
type DialOption interface {
	applyDial(*dialConfig)
	String() string
}

type dialConfig struct {
	username, password string
	tls                bool
	tlsConfig          *tls.Config
	dialOptions        []redis.DialOption
	pool               []func(*redis.Pool)
	errs               []error
}

type dialOption struct {
	fn   func(*dialConfig)
	name string
}

func (o dialOption) applyDial(c *dialConfig) { o.fn(c) }
func (o dialOption) String() string          { return o.name }

// WithCredentials authenticates every connection Dial's pools make: as the
// Redis ACL user username with password, or, with an empty username, with
// password alone (requirepass, the "default" user).
// Default: no authentication.
func WithCredentials(username, password string) DialOption {
	return dialOption{func(c *dialConfig) { c.username, c.password = username, password }, "WithCredentials(...)"}
}

// WithTLS makes every connection Dial's pools make use TLS, with a clone of
// cfg for each pool. A nil cfg means TLS 1.2 or later, with the server name
// taken from the host of each address. The connection and its handshake
// are made by a tls.Dialer within the caller's context (the node
// timeout), not by redigo's DialUseTLS, whose handshake ignores it.
// Default: plain TCP.
func WithTLS(cfg *tls.Config) DialOption {
	return dialOption{func(c *dialConfig) { c.tls, c.tlsConfig = true, cfg }, "WithTLS(...)"}
}

// WithDialOptions adds options to redis.DialContext for every connection
// (a database, timeouts, a client name), after those of WithCredentials
// and WithTLS, so that they win over them. A dial option that dials
// another server than the address (redis.DialContextFunc, redis.DialNetDial)
// makes the node something else than the server it is named after.
// Default: none.
func WithDialOptions(opts ...redis.DialOption) DialOption {
	return dialOption{func(c *dialConfig) { c.dialOptions = append(c.dialOptions, opts...) }, "WithDialOptions(...)"}
}

// WithPool calls fn on each server's pool, once per address, after NewPool
// has made it and before its first use: for MaxActive, Wait, TestOnBorrow.
// fn must leave DialContext set (Dial refuses the pool otherwise), and
// dialling the address it was made for.
// Default: NewPool's settings.
func WithPool(fn func(*redis.Pool)) DialOption {
	return dialOption{func(c *dialConfig) {
		if fn == nil {
			c.errs = append(c.errs, errors.New("WithPool(nil): the function is nil"))
		}
		c.pool = append(c.pool, fn)
	}, "WithPool(...)"}
}

// Dial returns one node per address, each an independent Redis master (one
// Redlock node), over a *redis.Pool of its own made by NewPool. Addresses
// are "host:port"; each node is named by its address as given (trimmed).
// redigo has no Redis Cluster client.
//
// Each node owns its pool: closing the node, as core.Locker.Close does,
// closes it (each is a *Node made with CloseClient). closeAll closes every
// node Dial returned; it is idempotent, so it is safe after Locker.Close,
// and it is for when core.New fails or is never called. A pool connects on first use: Dial neither connects nor
// sends anything, so a server that is down or hung does not hold it up,
// and its node works once the server is back. Defaults: no
// authentication, plain TCP, NewPool's settings.
//
// No addresses, an empty one, one without a port, one given twice, a nil
// option or a pool left without DialContext get an error matching
// core.ErrInvalidArgument; on error Dial returns no nodes and has closed
// what it made.
func Dial(addrs []string, opts ...DialOption) (nodes []core.Node, closeAll func() error, err error) {
	addrs, c, err := prepareDial(addrs, opts)
	if err != nil {
		return nil, nil, err
	}
	pools := make([]*redis.Pool, 0, len(addrs))
	fail := func(err error) ([]core.Node, func() error, error) {
		for _, p := range pools {
			_ = p.Close()
		}
		return nil, nil, err
	}
	for _, a := range addrs {
		p, err := c.poolFor(a)
		if err != nil {
			return fail(err)
		}
		pools = append(pools, p)
	}
	for i, p := range pools {
		node, err := New(p, WithName(addrs[i]), CloseClient())
		if err != nil {
			return fail(err)
		}
		nodes = append(nodes, node)
	}
	return nodes, driver.CloseAll(nodes), nil
}

// prepareDial checks Dial's arguments and returns the trimmed addresses
// and the configuration the options give.
func prepareDial(addrs []string, opts []DialOption) ([]string, *dialConfig, error) {
	addrs, err := driver.CheckAddrs("redigo", addrs)
	if err != nil {
		return nil, nil, err
	}
	var c dialConfig
	for i, o := range opts {
		if o == nil {
			return nil, nil, fmt.Errorf("%w: redigo: Dial: option %d is nil", core.ErrInvalidArgument, i)
		}
		o.applyDial(&c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, nil, fmt.Errorf("%w: redigo: Dial: %w", core.ErrInvalidArgument, err)
	}
	return addrs, &c, nil
}

// tlsFor returns the TLS configuration of a client of addr, or nil.
func (c *dialConfig) tlsFor(addr string) *tls.Config {
	return driver.TLSFor(c.tlsConfig, c.tls, addr)
}

// poolFor returns the pool of the server at addr.
func (c *dialConfig) poolFor(addr string) (*redis.Pool, error) {
	var dial []redis.DialOption
	if c.username != "" {
		dial = append(dial, redis.DialUsername(c.username))
	}
	if c.password != "" {
		dial = append(dial, redis.DialPassword(c.password))
	}
	if cfg := c.tlsFor(addr); cfg != nil {
		// Not redis.DialUseTLS: redigo's handshake ignores the context
		// (it waits up to DialTLSHandshakeTimeout, 10 s), where
		// tls.Dialer's ends with it, within the node timeout.
		dial = append(dial, redis.DialContextFunc((&tls.Dialer{Config: cfg}).DialContext))
	}
	p := NewPool(addr, append(dial, c.dialOptions...)...)
	for _, fn := range c.pool {
		fn(p)
	}
	if p.DialContext == nil {
		_ = p.Close()
		return nil, fmt.Errorf("%w: redigo: Dial: WithPool left Pool.DialContext nil for %s: the pool would dial without the caller's context, "+
			"so a server that accepts no connection would stall every round; keep DialContext", core.ErrInvalidArgument, addr)
	}
	return p, nil
}
